package nodestatus

import (
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeStatusSource supplies the container runtime's status as another
// component last observed it, for Options.RuntimeStatus. podsync's CRI
// syncer is one: it asks the runtime on every relist.
type RuntimeStatusSource interface {
	// LatestRuntimeStatus returns the last status observed and when it was
	// observed (the zero time while none was), or the error of the last
	// attempt to observe it. It never waits on the runtime.
	LatestRuntimeStatus() (status *runtimeapi.StatusResponse, observed time.Time, err error)
}

// RuntimeStatusFunc adapts a function to RuntimeStatusSource.
type RuntimeStatusFunc func() (*runtimeapi.StatusResponse, time.Time, error)

// LatestRuntimeStatus calls f.
func (f RuntimeStatusFunc) LatestRuntimeStatus() (*runtimeapi.StatusResponse, time.Time, error) {
	return f()
}

var _ RuntimeStatusSource = RuntimeStatusFunc(nil)

// errRuntimeStatusNotObserved is the status check's error while the
// RuntimeStatus source has observed nothing yet.
var errRuntimeStatusNotObserved = errors.New("the runtime's status has not been observed yet")
