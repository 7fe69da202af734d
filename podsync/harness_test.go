package podsync_test

import (
	"testing"

	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/internal/synctest"
)

// The engine's tests outside package podsync run it on the CRI syncer over
// the in-memory runtime, with the fixtures and harness podsync/cri's tests
// share. export_test.go gives them the engine's insides.

var (
	t0            = synctest.T0
	testPod       = synctest.TestPod
	withInit      = synctest.WithInit
	withEphemeral = synctest.WithEphemeral
	busyboxPod    = synctest.BusyboxPod
	readySandbox  = synctest.ReadySandbox
	running       = synctest.Running
	exited        = synctest.Exited
	cond          = synctest.Cond
)

type (
	fakeProbes      = synctest.FakeProbes
	recordingWriter = synctest.RecordingWriter
	calls           = synctest.Calls
	relisterFunc    = synctest.RelisterFunc
)

// harness steps an engine on podsync/cri's Syncer over the in-memory runtime.
type harness struct {
	*synctest.Harness[*cri.Syncer]
	t *testing.T
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, Harness: synctest.NewHarness(t, func(o synctest.SyncerOptions) (*cri.Syncer, error) {
		return cri.New(cri.Options{Runtime: o.Runtime, Clock: o.Clock, PodLogRoot: o.PodLogRoot, PodRoot: o.PodRoot, ResolvConf: "-", HostIPs: o.HostIPs})
	})}
}
