// Command agent is a Kubernetes node agent built from nodekit's packages: it
// registers the node, reports its status with kubelet's default status
// setters plus a custom disk-usage setter, renews the node lease, serves
// /healthz and /metrics, and runs pods: static pods from --pod-manifest-path
// and --manifest-url (with mirror pods in the API server) and the API
// server's pods bound to the node, through podsync on the container runtime,
// with probes and pod status written back.
//
//	agent --kubeconfig node.kubeconfig --hostname-override demo-node \
//	      --container-runtime-endpoint unix:///run/containerd/containerd.sock \
//	      --pod-manifest-path /etc/kubernetes/manifests
//
// --config reads kubelet's KubeletConfiguration file for the fields the
// agent supports (flags override it). Pods the node cannot take are
// rejected with kubelet's reasons (OutOfpods, OutOfcpu, NodeAffinity, ...).
// Without --kubeconfig it runs standalone: static pods only, no API server
// (no registration, lease, mirror pods or pod status writes). Without
// --container-runtime-endpoint it runs on an in-memory fake runtime. Like
// kubelet, it leaves pods running when it stops.
// See README.md beside this file for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 2
	}
	defer klog.Flush()
	if cfg.memoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(cfg.memoryLimit)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)

	a, err := newAgent(cfg, clock.RealClock{})
	if err != nil {
		logger.Error(err, "Cannot start the agent")
		return 1
	}
	runtimeName := cfg.runtimeEndpoint
	if runtimeName == "" {
		runtimeName = "fake (in memory)"
		logger.Info("No --container-runtime-endpoint: using the in-memory fake runtime (nothing runs; the node reports runtime fake://" + runtimetest.DefaultRuntimeVersion + ")")
	}
	logger.Info("Starting node agent", "node", a.name, "runtime", runtimeName, "standalone", a.client == nil, "pods", a.pods != nil,
		"leaseDuration", cfg.leaseDuration, "setters", len(a.setters))
	if cfg.nodeAPIOff != "" {
		logger.Info("Not serving the node API", "reason", cfg.nodeAPIOff)
	}
	err = a.Run(ctx)
	stop()
	if err != nil {
		logger.Error(err, "Agent failed")
		return 1
	}
	if a.client == nil {
		logger.Info("Stopped (standalone); pods are left running", "node", a.name)
	} else {
		logger.Info("Stopped; the node lease is left to expire", "node", a.name)
	}
	return 0
}
