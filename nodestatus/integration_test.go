//go:build linux

package nodestatus_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

// TestIntegrationRealHost computes the status of this machine with the
// default setters (real host facts, a fake runtime) and writes it to a real
// API server as system:node:<name>, first with UpdateStatus, then, as
// kubelet does, with a strategic-merge patch, keeping another agent's
// condition.
func TestIntegrationRealHost(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "nodestatus-it"
	client, err := cp.NodeClient(name)
	if err != nil {
		t.Fatal(err)
	}
	admin := cp.AdminClient()

	host, err := nodestatus.NewLinuxHost(nodestatus.LinuxHostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt := nodestatustest.NewRuntime()
	rt.SetVersion("containerd", "1.7.27")
	rt.SetImages(nodestatustest.Images(60))
	rt.SetHandlers(&runtimeapi.RuntimeHandler{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
		&runtimeapi.RuntimeHandler{Name: ""})
	rt.SetFeatures(&runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true})
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{Host: host, Runtime: rt,
		SystemReserved: corev1.ResourceList{"cpu": resourceMust("100m"), "memory": resourceMust("256Mi")}})
	if err != nil {
		t.Fatal(err)
	}
	du, err := nodestatus.DiskUsage(nodestatus.DiskUsageOptions{Path: "/", ResourceName: "example.com/root-disk"})
	if err != nil {
		t.Fatal(err)
	}
	if setters, err = setters.InsertBefore(nodestatus.SetterReady, nodestatus.Named{Name: "DiskUsage", StatusSetter: du}); err != nil {
		t.Fatal(err)
	}

	created, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the node as system:node:%s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	node := created.DeepCopy()
	if err := setters.SetStatus(ctx, node); err != nil {
		t.Fatalf("setters on the real host: %v", err)
	}
	updated, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("UpdateStatus as system:node:%s: %v", name, err)
	}
	checkNode(t, updated)

	// Another agent adds its condition.
	npd := updated.DeepCopy()
	npd.Status.Conditions = append(npd.Status.Conditions, corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse,
		Reason: "KernelHasNoDeadlock", Message: "kernel has no deadlock", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, npd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Next pass, written as kubelet writes: a strategic-merge patch of status.
	old, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := old.DeepCopy()
	if err := setters.SetStatus(ctx, next); err != nil {
		t.Fatal(err)
	}
	oldJSON, _ := json.Marshal(old)
	newJSON, _ := json.Marshal(next)
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	patched, err := client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("patching status as system:node:%s: %v\npatch: %s", name, err, patch)
	}
	checkNode(t, patched)
	found := false
	for _, c := range patched.Status.Conditions {
		found = found || c.Type == "KernelDeadlock"
	}
	if !found {
		t.Fatalf("the other agent's condition was lost: %v", patched.Status.Conditions)
	}
}

func checkNode(t *testing.T, n *corev1.Node) {
	t.Helper()
	conds := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range n.Status.Conditions {
		conds[c.Type] = c
	}
	if r := conds[corev1.NodeReady]; r.Status != corev1.ConditionTrue {
		t.Fatalf("stored node not ready: %+v", r)
	}
	for _, ct := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "DiskUsageHigh"} {
		if _, ok := conds[ct]; !ok {
			t.Errorf("no %s condition stored", ct)
		}
	}
	cpu := n.Status.Capacity[corev1.ResourceCPU]
	if cpu.Sign() <= 0 || len(n.Status.Images) != 50 || len(n.Status.Addresses) == 0 ||
		n.Status.NodeInfo.BootID == "" || n.Status.NodeInfo.ContainerRuntimeVersion != "containerd://1.7.27" ||
		len(n.Status.RuntimeHandlers) != 2 || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Fatalf("stored status incomplete: %+v", n.Status)
	}
	t.Logf("stored: addresses %v capacity %v allocatable %v nodeInfo %+v", n.Status.Addresses, n.Status.Capacity, n.Status.Allocatable, n.Status.NodeInfo)
}
