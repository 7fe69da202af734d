package testenv

import (
	"os"
	"path/filepath"
)

// WriteTree writes files (a path relative to root → its content) under
// root, making directories as needed: fake /proc, /sys and cgroup trees.
func WriteTree(t FatalTB, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("%v", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatalf("%v", err)
		}
	}
}
