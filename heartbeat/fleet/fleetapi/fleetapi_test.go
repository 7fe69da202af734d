package fleetapi_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/fleet/fleetapi"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

func TestFleetNodeAddress(t *testing.T) {
	for _, tc := range []struct {
		i    int
		want string
	}{{0, "127.64.0.1"}, {255, "127.64.1.0"}, {65535, "127.65.0.0"}, {0x7FFFFFFE - (127<<24 | 64<<16 | 1), "127.255.255.254"}} {
		if a, err := fleetapi.Address(tc.i); err != nil || a.String() != tc.want {
			t.Errorf("node %d: %v %v, want %s", tc.i, a, err, tc.want)
		}
	}
	for _, i := range []int{-1, 0x7FFFFFFF - (127<<24 | 64<<16 | 1)} {
		if _, err := fleetapi.Address(i); err == nil {
			t.Errorf("node %d: no error", i)
		}
	}
	if _, err := fleetapi.New(fleetapi.Options{}); err == nil || !strings.Contains(err.Error(), "Options.Node") {
		t.Errorf("no Node: %v", err)
	}
	if _, err := fleetapi.New(fleetapi.Options{Node: func(fleet.PodNode, func(context.Context) []*corev1.Pod) (nodeapi.Options, error) {
		return nodeapi.Options{}, nil
	}, Auth: nodeapi.AuthOptions{NodeName: "x"}}); err == nil || !strings.Contains(err.Error(), "NodeName") {
		t.Errorf("Auth.NodeName set: %v", err)
	}
}
