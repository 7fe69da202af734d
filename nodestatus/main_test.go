package nodestatus_test

import (
	"os"
	"testing"

	"github.com/nodekit/nodekit/internal/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m, &cp)) }
