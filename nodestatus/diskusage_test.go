package nodestatus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
)

func TestDiskUsage(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	var st nodestatus.FSStats
	var statErr error
	du, err := nodestatus.DiskUsage(nodestatus.DiskUsageOptions{
		Path: "/data", ResourceName: "example.com/data-disk", Clock: clk,
		StatFS: func(string) (nodestatus.FSStats, error) { return st, statErr },
	})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	for i, tc := range []struct {
		capacity, avail uint64
		err             error
		status          corev1.ConditionStatus
		reason, message string
		transition      int // pass whose time is the transition time
	}{
		{100, 50, nil, corev1.ConditionFalse, "DiskUsageBelowThreshold", "file system of /data is 50% full (threshold 90%)", 0},
		{100, 11, nil, corev1.ConditionFalse, "DiskUsageBelowThreshold", "file system of /data is 89% full (threshold 90%)", 0},
		{100, 10, nil, corev1.ConditionTrue, "DiskUsageAboveThreshold", "file system of /data is 90% full (threshold 90%)", 2},
		{100, 0, nil, corev1.ConditionTrue, "DiskUsageAboveThreshold", "file system of /data is 100% full (threshold 90%)", 2},
		{0, 0, errors.New("statfs /data: no such file or directory"), corev1.ConditionUnknown, "DiskUsageUnknown", "cannot read the file system of /data", 4},
	} {
		st, statErr = nodestatus.FSStats{Capacity: tc.capacity << 30, Available: tc.avail << 30}, tc.err
		err := du.SetStatus(context.Background(), node)
		if (err != nil) != (tc.err != nil) {
			t.Fatalf("pass %d: error %v", i, err)
		}
		c := cond(t, node, nodestatus.DiskUsageCondition)
		if c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message ||
			!c.LastTransitionTime.Time.Equal(t0.Add(time.Duration(tc.transition)*time.Minute)) || !c.LastHeartbeatTime.Time.Equal(clk.Now()) {
			t.Fatalf("pass %d: condition %+v", i, c)
		}
		if tc.err == nil && qty(node, false, "example.com/data-disk") != "100Gi" {
			t.Fatalf("pass %d: capacity %v", i, node.Status.Capacity)
		}
		clk.Step(time.Minute)
	}

	for _, bad := range []nodestatus.DiskUsageOptions{
		{Path: "data"},
		{Path: "/data", ThresholdPercent: 101},
		{Path: "/data", ConditionType: corev1.NodeDiskPressure},
		{Path: "/data", ResourceName: "disk"},
		{Path: "/data", ResourceName: "kubernetes.io/disk"},
	} {
		if _, err := nodestatus.DiskUsage(bad); err == nil || !strings.Contains(err.Error(), "DiskUsageOptions.") {
			t.Errorf("%+v: error %v", bad, err)
		}
	}
}
