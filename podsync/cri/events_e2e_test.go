package cri

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/internal/synctest"
	"github.com/nodekit/nodekit/runtime/remote"
)

// TestE2EContainerEvents checks how the engine observes a real containerd
// under Run with kubelet's periods (relist every 1s, 1h while events are in
// use, here, and no resync within the test). On containerd 2 it takes the
// CRI container events: it says so and still reports within a minute that
// a container exited on its own, with no full relist in between (without
// events there is one a second): only an event can have told it. On
// containerd 1.x, which has no events, it says so and relists every second,
// which reports the exit too. (The engine's own event state is checked by
// podsync's engine_events_test on the in-memory runtime.)
func TestE2EContainerEvents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		need    func(testing.TB, *containerdtest.Containerd) *containerdtest.Containerd
		c       *containerdtest.Containerd
		evented bool
		log     string
	}{
		{"containerd1", containerdtest.Need, ctrd, false, "The container runtime has no container events; relisting"},
		{"containerd2", containerdtest.Need2, ctrd2, true, "Container events in use; relisting less often"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.need(t, tc.c)
			t.Cleanup(leakcheck.Check(t))
			rt, err := remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			e := &e2e{t: t, c: c, rt: rt, writer: &recordingWriter{}, done: make(chan error, 1)}
			e.cri, err = New(Options{Runtime: rt, PodLogRoot: c.PodLogRoot, PodRoot: t.TempDir(), CgroupRoot: c.CgroupRoot, CgroupsPerQOS: true,
				ResolvConf: "-", HostIPs: []string{"127.0.0.1"}})
			if err != nil {
				t.Fatal(err)
			}
			rl := &countingRelister{Syncer: e.cri}
			e.eng, err = podsync.New(podsync.Options{Syncer: e.cri, Relister: rl, Writer: e.writer, HostIPs: []string{"127.0.0.1"},
				RelistPeriod: time.Second, EventedRelistPeriod: time.Hour, ResyncPeriod: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			logs := &synctest.LogLines{}
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logs.Logger()))
			e.cancel = cancel
			go func() { e.done <- e.eng.Run(ctx) }()
			t.Cleanup(e.stop)

			testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "the engine's log line "+tc.log, func() bool {
				return logs.Count(tc.log) > 0
			})
			const script = `trap 'exit 0' TERM; while [ ! -e /tmp/exit ]; do sleep 1; done; exit 3`
			pod := e2ePod(c, "events-"+tc.name, corev1.RestartPolicyNever, "sh", "-c", script)
			e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
			s := e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
			id := strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")

			relists := rl.relists.Load()
			if _, err := rt.ExecSync(ctx, id, []string{"touch", "/tmp/exit"}, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			e.waitStatus(pod, "Failed with exit code 3", func(s corev1.PodStatus) bool {
				return s.Phase == corev1.PodFailed && len(s.ContainerStatuses) == 1 &&
					s.ContainerStatuses[0].State.Terminated != nil && s.ContainerStatuses[0].State.Terminated.ExitCode == 3
			})
			full := rl.relists.Load() - relists
			t.Logf("exit seen after %d full relists, %d pod relists in all", full, rl.podRelists.Load())
			if tc.evented {
				if full != 0 {
					t.Errorf("%d full relists between the container's exit and its report, want none (events only)", full)
				}
			}
			e.remove(pod)
		})
	}
}

// countingRelister counts the syncer's full relists and pod relists.
type countingRelister struct {
	*Syncer
	relists, podRelists atomic.Int64
}

func (c *countingRelister) Relist(ctx context.Context) (map[types.UID]*podsync.PodState, error) {
	c.relists.Add(1)
	return c.Syncer.Relist(ctx)
}

func (c *countingRelister) RelistPod(ctx context.Context, uid types.UID) (*podsync.PodState, error) {
	c.podRelists.Add(1)
	return c.Syncer.RelistPod(ctx, uid)
}
