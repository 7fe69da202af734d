// Command localcontainerd starts a containerd of its own with the test
// harness (internal/containerdtest): its own root, state, sockets and cgroup
// root, the locally built pause and busybox images imported, and a
// loopback-only CNI configuration so the runtime reports NetworkReady. It
// runs until SIGINT or SIGTERM and then removes every sandbox, cgroup, mount
// and file it made. make demo runs pods on it.
//
//	go run ./internal/containerdtest/localcontainerd -dir /tmp/nodekit-demo
//	go run ./internal/containerdtest/localcontainerd -major 2   # containerd 2 from `make testbin`
//
// Once ready it prints one line on stdout:
//
//	ready <endpoint> <busybox image> <pod log root> <cgroup root>
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/internal/containerdtest"
)

func main() {
	dir := flag.String("dir", "", "directory to create the instance's directory in (default: the temporary directory)")
	major := flag.Int("major", 1, "1: the host's containerd 1.x; 2: containerd 2 from the test binaries (make testbin)")
	flag.Parse()
	if err := run(*dir, *major); err != nil {
		fmt.Fprintln(os.Stderr, "localcontainerd:", err)
		os.Exit(1)
	}
}

func run(dir string, major int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := containerdtest.Start(startCtx, containerdtest.Options{Dir: dir, Major: major})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcontainerd: stopping:", err)
		}
	}()
	if err := c.EnableNetwork(startCtx); err != nil {
		return err
	}
	fmt.Println("ready", c.Endpoint, c.BusyboxImage, c.PodLogRoot, c.CgroupRoot)
	<-ctx.Done()
	return nil
}
