// Command localcluster starts a local kube-apiserver and etcd (the same
// control plane the tests use), writes kubeconfig files for an admin and for
// node identities and the client CA (ca.crt, an agent's --client-ca-file)
// into a directory, and runs until SIGINT or SIGTERM.
//
//	go run ./internal/controlplane/localcluster -dir /tmp/nodekit-demo -node demo-node
//
// It prints "ready" on stdout once the files are written. With
// -metrics-server-kubelet-ca it also runs metrics-server (the control plane
// then has the aggregation layer on): once that file (a node's serving
// certificate, or the CA that signed it) exists, metrics-server starts with
// it and registers as the metrics API, and "metrics-server ready" (or
// "metrics-server failed: <error>", or "metrics-server unavailable:
// <error>" when the binary is missing) is printed.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/internal/controlplane"
)

func main() {
	dir := flag.String("dir", "", "directory for the kubeconfig files (required)")
	nodes := flag.String("node", "", "comma-separated node names to write node-<name>.kubeconfig for")
	kubeletCA := flag.String("metrics-server-kubelet-ca", "", "run metrics-server, verifying the nodes' serving certificates with this file once it exists")
	flag.Parse()
	if err := run(*dir, *nodes, *kubeletCA); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(dir, nodes, kubeletCA string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	cp, err := controlplane.Start(startCtx, controlplane.Options{Aggregator: kubeletCA != ""})
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster: stopping:", err)
		}
	}()
	if err := controlplane.WriteKubeconfig(cp.AdminConfig(), filepath.Join(dir, "admin.kubeconfig")); err != nil {
		return err
	}
	// The CA of every client certificate, the API server's towards node
	// APIs too: an agent's --client-ca-file.
	ca, err := os.ReadFile(cp.ClientCAFile())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644); err != nil {
		return err
	}
	for _, name := range strings.Split(nodes, ",") {
		if name == "" {
			continue
		}
		cfg, err := cp.NodeConfig(name)
		if err != nil {
			return err
		}
		if err := controlplane.WriteKubeconfig(cfg, filepath.Join(dir, "node-"+name+".kubeconfig")); err != nil {
			return err
		}
	}
	fmt.Println("ready", cp.Host())
	if kubeletCA != "" {
		ms, err := startMetricsServer(ctx, cp, kubeletCA)
		switch {
		case errors.Is(err, controlplane.ErrUnavailable):
			fmt.Println("metrics-server unavailable:", err)
		case err != nil:
			fmt.Println("metrics-server failed:", err)
		case ms != nil:
			defer func() {
				if err := ms.Stop(); err != nil {
					fmt.Fprintln(os.Stderr, "localcluster: stopping metrics-server:", err)
				}
			}()
			fmt.Println("metrics-server ready on port", ms.Port())
		}
	}
	<-ctx.Done()
	return nil
}

// startMetricsServer waits until the file kubeletCA holds a whole
// certificate (the node writes it at its start), then starts
// metrics-server with it. It returns nil, nil when ctx ends first.
func startMetricsServer(ctx context.Context, cp *controlplane.ControlPlane, kubeletCA string) (*controlplane.MetricsServer, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(kubeletCA); err == nil && bytes.Contains(data, []byte("-----END CERTIFICATE-----")) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-tick.C:
		}
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return cp.StartMetricsServer(startCtx, controlplane.MetricsServerOptions{KubeletCAFile: kubeletCA})
}
