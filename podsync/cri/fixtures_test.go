package cri

import (
	"testing"

	"github.com/nodekit/nodekit/podsync/internal/synctest"
)

// The fixtures and the engine harness podsync's tests share.

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
	relisterFunc    = synctest.RelisterFunc
)

// harness steps an engine on this package's Syncer over the in-memory runtime.
type harness struct {
	*synctest.Harness[*Syncer]
	t *testing.T
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, Harness: synctest.NewHarness(t, func(o synctest.SyncerOptions) (*Syncer, error) {
		return New(Options{Runtime: o.Runtime, Clock: o.Clock, PodLogRoot: o.PodLogRoot, PodRoot: o.PodRoot, ResolvConf: "-", HostIPs: o.HostIPs})
	})}
}
