// Command pause is the sandbox ("pause") container of the end-to-end tests:
// it holds a pod's namespaces open and does nothing else. It blocks until
// SIGINT or SIGTERM and then exits 0, and while it waits it reaps any child
// that is reparented to it (it is PID 1 of a pod that shares its PID
// namespace). Built with CGO_ENABLED=0 it is a static binary that needs no
// files in its image.
package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		reap()
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
