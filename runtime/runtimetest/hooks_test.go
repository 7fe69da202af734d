package runtimetest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func TestHookFiresForItsMethodOnly(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	_, id := createdContainer(t, f)
	boom := errors.New("boom")
	var seen []string
	f.SetHooks(runtimetest.Hooks{StopContainer: func(_ context.Context, containerID string, _ time.Duration) error {
		seen = append(seen, containerID)
		return boom
	}})
	// Other methods are untouched.
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer with a StopContainer hook: %v", err)
	}
	if _, err := f.ContainerStatus(ctx, id, false); err != nil {
		t.Fatalf("ContainerStatus with a StopContainer hook: %v", err)
	}
	if err := f.StopContainer(ctx, id, time.Second); !errors.Is(err, boom) {
		t.Fatalf("StopContainer = %v, want boom", err)
	}
	if len(seen) != 1 || seen[0] != id {
		t.Errorf("hook saw %v, want [%s]", seen, id)
	}
	// The failed call did nothing.
	if st, _ := f.ContainerStatus(ctx, id, false); st.GetStatus().GetState().String() != "CONTAINER_RUNNING" {
		t.Errorf("state after a failed StopContainer: %v, want CONTAINER_RUNNING", st.GetStatus().GetState())
	}

	// Cleared, the call goes through.
	f.SetHooks(runtimetest.Hooks{})
	if err := f.StopContainer(ctx, id, time.Second); err != nil {
		t.Fatalf("StopContainer after the hooks were cleared: %v", err)
	}
	if len(seen) != 1 {
		t.Errorf("a cleared hook ran: %v", seen)
	}
}

func TestHookCanObserveAndCallTheFake(t *testing.T) {
	ctx := context.Background()
	var f *runtimetest.Runtime
	var calls int
	f = runtimetest.New(runtimetest.Options{Hooks: runtimetest.Hooks{
		Version: func(context.Context) error {
			calls = len(f.Calls()) // the fake's lock is not held
			return nil
		},
	}})
	if _, err := f.Version(ctx); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("the hook saw %d calls, want 1 (its own)", calls)
	}
}

func TestErrors(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	next := runtimetest.Errors(a, b)
	for i, want := range []error{a, b, nil, nil} {
		if got := next(); got != want {
			t.Errorf("call %d: %v, want %v", i, got, want)
		}
	}
}

func TestHooksConcurrent(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	var fired atomic.Int64
	hooks := runtimetest.Hooks{Version: func(context.Context) error {
		fired.Add(1)
		return nil
	}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				f.SetHooks(hooks)
				f.SetHooks(runtimetest.Hooks{})
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = f.Version(ctx)
			}
		}()
	}
	wg.Wait()
	f.SetHooks(hooks)
	before := fired.Load()
	if _, err := f.Version(ctx); err != nil || fired.Load() != before+1 {
		t.Errorf("Version after SetHooks: err %v, hook ran %d times, want once", err, fired.Load()-before)
	}
}

// createdContainer runs sandbox "p" with container "c" created in it.
func createdContainer(t *testing.T, f *runtimetest.Runtime) (sandboxID, containerID string) {
	t.Helper()
	ctx := context.Background()
	sb, err := f.RunPodSandbox(ctx, sandboxConfig("p"), "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.CreateContainer(ctx, sb, containerConfig("c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return sb, id
}
