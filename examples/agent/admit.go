package main

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/runtime"
)

// admissionNode is the node pods are admitted against: the Node as the
// heartbeat last read or wrote it (labels, taints and allocatable as the
// API has them), else (standalone, or before the Node is registered) the
// Node the agent registers, with the capacity and allocatable the
// MachineInfo setter computes, computed once. Static pods arrive before
// registration, and kubelet admits them against its own initial node too.
type admissionNode struct {
	cfg   *config
	name  string
	hb    *heartbeat.Heartbeat // nil: standalone
	rt    nodestatus.RuntimeInfo
	clock clock.PassiveClock

	once  sync.Once
	local *corev1.Node
	err   error
}

// Node returns the node; it never waits on the network.
func (n *admissionNode) Node() (*corev1.Node, error) {
	if n.hb != nil {
		if node := n.hb.Node(); node != nil {
			return node, nil
		}
	}
	n.once.Do(func() { n.local, n.err = n.localNode() })
	return n.local, n.err
}

func (n *admissionNode) localNode() (*corev1.Node, error) {
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{
		Hostname: n.name, NodeIPs: n.cfg.nodeIPs, Runtime: n.rt, MaxPods: n.cfg.maxPods, PodsPerCore: n.cfg.podsPerCore,
		SystemReserved: n.cfg.systemReserved, KubeReserved: n.cfg.kubeReserved, Clock: n.clock,
	})
	if err != nil {
		return nil, err
	}
	i := setters.Index(nodestatus.SetterMachineInfo)
	if i < 0 {
		return nil, fmt.Errorf("no %s setter", nodestatus.SetterMachineInfo)
	}
	node := nodeTemplate(n.cfg, n.name)
	if err := setters[i:i+1].Run(context.Background(), node, n.clock.Now()); err != nil {
		return nil, fmt.Errorf("node capacity: %w", err)
	}
	return node, nil
}

// ensurePauseImage makes sure the runtime has the sandbox image
// (--pod-infra-container-image), pulling it when it is missing, before the
// first sandbox needs it. The runtime's own configuration still chooses the
// image its sandboxes run, as with kubelet. A failure is logged: sandboxes
// then fail with the runtime's own error.
func ensurePauseImage(ctx context.Context, rt runtime.Runtime, image string) {
	if image == "" {
		return
	}
	logger := klog.FromContext(ctx)
	spec := &runtimeapi.ImageSpec{Image: image}
	if st, err := rt.ImageStatus(ctx, spec, false); err == nil && st.GetImage() != nil {
		logger.V(2).Info("Sandbox image present", "image", image)
		return
	}
	ref, err := rt.PullImage(ctx, spec, nil, nil)
	if err != nil {
		logger.Error(err, "Cannot pull the sandbox image (--pod-infra-container-image)", "image", image)
		return
	}
	logger.Info("Pulled the sandbox image", "image", image, "ref", ref)
}
