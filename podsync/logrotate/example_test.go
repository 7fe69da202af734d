package logrotate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync/logrotate"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A log at MaxSize is renamed with a timestamp and the runtime reopens it.
func Example() {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{})
	dir, _ := os.MkdirTemp("", "logs")
	defer os.RemoveAll(dir)
	sbc := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}, LogDirectory: dir}
	sb, _ := rt.RunPodSandbox(ctx, sbc, "")
	id, _ := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}, LogPath: "0.log"}, sbc)
	_ = rt.StartContainer(ctx, id)
	_ = os.WriteFile(filepath.Join(dir, "0.log"), make([]byte, 2048), 0o640) // what the runtime wrote

	m, err := logrotate.New(logrotate.Options{Runtime: rt, MaxSize: 1024, MaxFiles: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.SyncOnce(ctx); err != nil {
		fmt.Println(err)
		return
	}
	rotated, _ := filepath.Glob(filepath.Join(dir, "0.log.*"))
	fmt.Println(len(rotated), strings.HasPrefix(filepath.Base(rotated[0]), "0.log.20"))
	// Output: 1 true
}
