package nodestatus_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

// The defaults for a simulated node, with a custom disk-usage setter added
// before Ready.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	host := nodestatustest.NewHost(nodestatustest.Facts("node-1"))
	rt := nodestatustest.NewRuntime()
	rt.SetVersion("containerd", "1.7.27")
	rt.SetImages(nodestatustest.Images(3))

	setters, err := nodestatus.DefaultSetters(nodestatus.Options{
		Host:           host,
		Runtime:        rt,
		SystemReserved: corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1Gi")},
		Clock:          clk,
	})
	if err != nil {
		panic(err)
	}

	du, err := nodestatus.DiskUsage(nodestatus.DiskUsageOptions{
		Path:             "/data",
		ThresholdPercent: 80,
		ResourceName:     "example.com/data-disk",
		// A real agent leaves StatFS unset to read the file system.
		StatFS: func(path string) (nodestatus.FSStats, error) {
			return nodestatus.FSStats{Path: path, Capacity: 100 << 30, Available: 15 << 30}, nil
		},
		Clock: clk,
	})
	if err != nil {
		panic(err)
	}
	setters, err = setters.InsertBefore(nodestatus.SetterReady, nodestatus.Named{Name: "DiskUsage", StatusSetter: du})
	if err != nil {
		panic(err)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if err := setters.SetStatus(ctx, node); err != nil {
		panic(err)
	}

	var names []string
	for _, s := range setters {
		names = append(names, s.Name)
	}
	fmt.Println(strings.Join(names, " "))
	for _, r := range []corev1.ResourceName{"cpu", "memory", "pods", "ephemeral-storage", "example.com/data-disk"} {
		c, a := node.Status.Capacity[r], node.Status.Allocatable[r]
		fmt.Printf("%s: capacity %s, allocatable %s\n", r, c.String(), a.String())
	}
	fmt.Println(node.Status.NodeInfo.ContainerRuntimeVersion, node.Status.NodeInfo.KubeletVersion, len(node.Status.Images), "images")
	for _, a := range node.Status.Addresses {
		fmt.Println(a.Type, a.Address)
	}
	for _, c := range node.Status.Conditions {
		fmt.Printf("%s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	// Output:
	// NodeAddress MachineInfo VersionInfo DaemonEndpoints Images GoRuntime RuntimeHandlers NodeFeatures MemoryPressure DiskPressure PIDPressure DiskUsage Ready VolumesInUse
	// cpu: capacity 4, allocatable 3500m
	// memory: capacity 16Gi, allocatable 15260Mi
	// pods: capacity 110, allocatable 110
	// ephemeral-storage: capacity 107374182400, allocatable 96636764160
	// example.com/data-disk: capacity 100Gi, allocatable 100Gi
	// containerd://1.7.27 v1.37.2+nodekit 3 images
	// InternalIP 10.72.168.110
	// Hostname node-1
	// MemoryPressure=False KubeletHasSufficientMemory: kubelet has sufficient memory available
	// DiskPressure=False KubeletHasNoDiskPressure: kubelet has no disk pressure
	// PIDPressure=False KubeletHasSufficientPID: kubelet has sufficient PID available
	// DiskUsageHigh=True DiskUsageAboveThreshold: file system of /data is 85% full (threshold 80%)
	// Ready=True KubeletReady: kubelet is posting ready status
}

// A custom condition with kubelet's bookkeeping: the transition time moves
// only when the status changes.
func ExampleSetCondition() {
	node := &corev1.Node{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, ok := range []bool{true, true, false} {
		c := corev1.NodeCondition{Type: "GPUHealthy", Status: corev1.ConditionFalse, Reason: "GPUFault"}
		if ok {
			c.Status, c.Reason = corev1.ConditionTrue, "GPUOK"
		}
		now := metav1.NewTime(t0.Add(time.Duration(i) * time.Minute))
		nodestatus.SetCondition(node, c, now)
		got := node.Status.Conditions[0]
		fmt.Println(got.Status, got.Reason, got.LastTransitionTime.Format("15:04"), got.LastHeartbeatTime.Format("15:04"))
	}
	// Output:
	// True GPUOK 00:00 00:00
	// True GPUOK 00:00 00:01
	// False GPUFault 00:02 00:02
}
