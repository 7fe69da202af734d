package usage_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A collector on a fake /proc tree and the fake runtime: one sample, read
// back as kubelet's Summary.
func Example() {
	root, _ := os.MkdirTemp("", "usage-example")
	defer os.RemoveAll(root)
	for rel, content := range map[string]string{
		"proc/stat":    "cpu  100 0 100 1000 0 0 0 0 0 0\nbtime 1700000000\n",
		"proc/meminfo": "MemTotal: 4194304 kB\nMemFree: 2097152 kB\nInactive(file): 1048576 kB\nAnonPages: 524288 kB\n",
		"proc/vmstat":  "pgfault 10\npgmajfault 1\n",
	} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755)
		_ = os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644)
	}
	c, err := usage.New(usage.Options{
		NodeName: "node-1",
		Runtime:  runtimetest.New(runtimetest.Options{}),
		HostRoot: root,
		RootDir:  root,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.SyncOnce(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	n := c.Latest().Summary.Node
	fmt.Printf("%s: cpu %.1fs, working set %d MiB, %d pods\n", n.NodeName,
		float64(*n.CPU.UsageCoreNanoSeconds)/1e9, *n.Memory.WorkingSetBytes>>20, len(c.Latest().Summary.Pods))
	// Output: node-1: cpu 2.0s, working set 1024 MiB, 0 pods
}
