package remote

import "testing"

// TestOperationType gives kubelet's operation_type for every CRI method
// the Client calls that does not follow from snake case alone, and some
// that do.
func TestOperationType(t *testing.T) {
	for method, want := range map[string]string{
		"RunPodSandbox":            "run_podsandbox",
		"ListPodSandbox":           "list_podsandbox",
		"PodSandboxStatus":         "podsandbox_status",
		"ListPodSandboxStats":      "list_podsandbox_stats",
		"ListPodSandboxMetrics":    "list_podsandbox_metrics",
		"UpdateContainerResources": "update_container",
		"ImageFsInfo":              "image_fs_info",
		"ExecSync":                 "exec_sync",
		"ReopenContainerLog":       "reopen_container_log",
		"Version":                  "version",
	} {
		if got := operationType(method); got != want {
			t.Errorf("operationType(%q) = %q, want %q", method, got, want)
		}
	}
}
