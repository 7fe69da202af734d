// Command localcluster starts a local kube-apiserver and etcd (the same
// control plane the tests use), writes kubeconfig files for an admin and for
// node identities and the client CA (ca.crt, an agent's --client-ca-file)
// into a directory, and runs until SIGINT or SIGTERM.
//
//	go run ./internal/controlplane/localcluster -dir /tmp/nodekit-demo -node demo-node
//
// It prints "ready" on stdout once the files are written.
package main

import (
	"context"
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
	flag.Parse()
	if err := run(*dir, *nodes); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(dir, nodes string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	cp, err := controlplane.Start(startCtx, controlplane.Options{})
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
	<-ctx.Done()
	return nil
}
