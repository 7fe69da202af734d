package nodestatus_test

import (
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/runtime"
)

// A runtime.Runtime is a nodestatus.RuntimeInfo.
var _ nodestatus.RuntimeInfo = runtime.Runtime(nil)
