// Command agent is a Kubernetes node agent built from nodekit's packages: it
// registers the node, reports its status with kubelet's default status
// setters plus a custom disk-usage setter, renews the node lease, and serves
// /healthz and /metrics. It runs no pods yet.
//
//	agent --kubeconfig node.kubeconfig --hostname-override demo-node \
//	      --container-runtime-endpoint unix:///run/containerd/containerd.sock
//
// Without --container-runtime-endpoint it runs on an in-memory fake runtime.
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
	}
	logger.Info("Starting node agent", "node", a.name, "runtime", runtimeName,
		"leaseDuration", cfg.leaseDuration, "setters", len(a.setters))
	err = a.Run(ctx)
	stop()
	if err != nil {
		logger.Error(err, "Agent failed")
		return 1
	}
	logger.Info("Stopped; the node lease is left to expire", "node", a.name)
	return 0
}
