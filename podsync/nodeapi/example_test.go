package nodeapi_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// Reading a container's log as kubectl logs --tail=1 --timestamps does.
func Example() {
	root, _ := os.MkdirTemp("", "nodeapi-example")
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "default_web_0b6c5a1e-1f0c-4d4e-9d7a-3f2b1c0d9e8f", "app")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "0.log"), []byte(
		"2026-03-01T12:00:00.000000001Z stdout F hello\n"+
			"2026-03-01T12:00:01.000000002Z stderr P wor\n"+
			"2026-03-01T12:00:01.000000003Z stderr F ld\n"), 0o644)

	h, err := nodeapi.New(nodeapi.Options{PodLogRoot: root})
	if err != nil {
		fmt.Println(err)
		return
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/containerLogs/default/web/app?tailLines=2&timestamps=true", nil))
	fmt.Print(w.Body.String())
	// Output: 2026-03-01T12:00:01.000000002Z world
}
