package runtimeclass

import (
	"context"
	"errors"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

func class(name, handler string) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
}

func run(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestLookup: the handler of a class; "" for no name; the kubelet's
// NotFound for a missing class; classes created and deleted later are
// seen through the watch.
func TestLookup(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	cs := fake.NewClientset(class("kata", "kata-qemu"))
	m, err := New(Options{Client: cs.NodeV1().RuntimeClasses()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	ctx := context.Background()
	if h, err := m.LookupRuntimeHandler(ctx, nil); h != "" || err != nil {
		t.Errorf("nil: %q, %v", h, err)
	}
	if h, err := m.LookupRuntimeHandler(ctx, new("")); h != "" || err != nil {
		t.Errorf("empty: %q, %v", h, err)
	}
	// The first lookup waits for the first list.
	if h, err := m.LookupRuntimeHandler(ctx, new("kata")); h != "kata-qemu" || err != nil {
		t.Errorf("kata: %q, %v", h, err)
	}
	if !m.HasSynced() {
		t.Error("not synced after a lookup")
	}
	_, err = m.LookupRuntimeHandler(ctx, new("gvisor"))
	if !apierrors.IsNotFound(err) || err.Error() != `runtimeclass.node.k8s.io "gvisor" not found` {
		t.Errorf("gvisor: %v", err)
	}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, class("gvisor", "runsc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, 5*time.Millisecond, "gvisor seen", func() bool {
		h, err := m.LookupRuntimeHandler(ctx, new("gvisor"))
		return h == "runsc" && err == nil
	})
	if err := cs.NodeV1().RuntimeClasses().Delete(ctx, "kata", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, 5*time.Millisecond, "kata gone", func() bool {
		_, err := m.LookupRuntimeHandler(ctx, new("kata"))
		return apierrors.IsNotFound(err)
	})
}

// TestLookupWithoutClient: without an API server every class is not
// found, at once, and Run only waits.
func TestLookupWithoutClient(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	_, err = m.LookupRuntimeHandler(context.Background(), new("kata"))
	if !apierrors.IsNotFound(err) || err.Error() != `runtimeclass.node.k8s.io "kata" not found` {
		t.Errorf("kata: %v", err)
	}
}

// TestLookupListError: while the list fails, a lookup says so as the
// kubelet does; before the first list it waits no longer than its
// context.
func TestLookupListError(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	cs := fake.NewClientset()
	cs.PrependReactor("list", "runtimeclasses", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(nodev1.Resource("runtimeclasses"), "", errors.New("no"))
	})
	m, err := New(Options{Client: cs.NodeV1().RuntimeClasses()})
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.LookupRuntimeHandler(ended, new("kata")); !errors.Is(err, context.Canceled) {
		t.Errorf("before Run: %v", err)
	}
	run(t, m)
	_, err = m.LookupRuntimeHandler(context.Background(), new("kata"))
	if err == nil || !apierrors.IsForbidden(err) || err.Error() != `failed to lookup RuntimeClass kata: runtimeclasses.node.k8s.io is forbidden: no` {
		t.Errorf("forbidden: %v", err)
	}
}
