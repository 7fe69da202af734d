package nodekit_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
)

// TestPodHalfSecurityAdmission: the pod half rejects, in the kubelet's
// order, a pod with a forbidden sysctl (SysctlForbidden), one asking for
// AppArmor on a host without it, and one with a field nodekit does not
// implement (PodFeatureUnsupported naming it); an allowed unsafe sysctl
// and a safe one are admitted. Standalone, static pods.
func TestPodHalfSecurityAdmission(t *testing.T) {
	if admission.HostAppArmorEnabled() {
		t.Skip("the host enforces AppArmor")
	}
	dir := t.TempDir()
	manifest := func(name, spec string) {
		body := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  uid: uid-" + name + "\nspec:\n" + spec +
			"  containers:\n  - name: app\n    image: busybox\n"
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	manifest("unsafe-sysctl", "  securityContext:\n    sysctls:\n    - {name: vm.swappiness, value: \"10\"}\n")
	manifest("allowed-sysctl", "  securityContext:\n    sysctls:\n    - {name: net.core.somaxconn, value: \"1024\"}\n    - {name: kernel.shm_rmid_forced, value: \"1\"}\n")
	manifest("apparmor", "  securityContext:\n    appArmorProfile: {type: RuntimeDefault}\n")
	manifest("gitrepo", "  volumes:\n  - name: src\n    gitRepo: {repository: https://example.com/x.git}\n")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}
	syncer := podsync.SyncerFuncs{}
	relister := relistNothing{}
	p, err := nodekit.NewPodHalf(nodekit.PodHalfOptions{NodeName: "n1", ManifestPath: dir, HostIPs: []string{"192.0.2.1"},
		LocalNode:            func() (*corev1.Node, error) { return node, nil },
		AllowedUnsafeSysctls: []string{"net.core.somaxconn"},
		Backend: func(podsync.BackendParts) (podsync.Backend, error) {
			return podsync.Backend{Syncer: syncer, Relister: relister}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	runPodHalf(t, p)
	want := map[string]struct{ reason, message string }{
		"unsafe-sysctl": {admission.ReasonSysctlForbidden, `Pod was rejected: forbidden sysctl: "vm.swappiness" not allowlisted`},
		"apparmor":      {admission.ReasonAppArmor, "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		"gitrepo": {admission.ReasonPodFeatureUnsupported,
			"Pod was rejected: spec.volumes[0].gitRepo is not supported by this node: nodekit serves emptyDir, hostPath, secret, configMap, downwardAPI and projected volumes only"},
	}
	for name, w := range want {
		uid := types.UID("uid-" + name)
		var s corev1.PodStatus
		testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, name+" rejected", func() bool {
			s, _ = p.Engine().PodStatus(uid)
			return s.Phase == corev1.PodFailed
		})
		if s.Reason != w.reason || s.Message != w.message {
			t.Errorf("%s: %q %q, want %q %q", name, s.Reason, s.Message, w.reason, w.message)
		}
	}
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "allowed-sysctl admitted", func() bool {
		l, ok := p.Engine().PodLifecycle("uid-allowed-sysctl")
		s, _ := p.Engine().PodStatus("uid-allowed-sysctl")
		return ok && l == podsync.Syncing && s.Phase != corev1.PodFailed && s.Phase != ""
	})
}

// runPodHalf runs p until the test ends, and then checks that Run
// returned no error; it returns the context p runs in.
func runPodHalf(t *testing.T, p *nodekit.PodHalf) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ctx
}

type relistNothing struct{}

func (relistNothing) Relist(context.Context) (map[types.UID]*podsync.PodState, error) {
	return map[types.UID]*podsync.PodState{}, nil
}
