package containerdtest

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// Kill sends sig to the containerd process alone and waits until it has
// exited or ctx ends. The shims and the containers they run are not
// signalled: they keep running, as they do on a node whose containerd dies
// or is stopped for an upgrade, and Restart's containerd finds them again.
// SIGTERM is containerd's clean shutdown, SIGKILL a crash.
func (c *Containerd) Kill(ctx context.Context, sig syscall.Signal) error {
	c.mu.Lock()
	d, stopped := c.proc, c.stopped
	c.mu.Unlock()
	switch {
	case stopped:
		return errors.New("containerdtest: Kill after Stop")
	case d == nil:
		return errors.New("containerdtest: Kill before containerd was started")
	}
	select {
	case <-d.exited:
		return fmt.Errorf("containerdtest: Kill: containerd (pid %d) has already exited (%v)", d.cmd.Process.Pid, d.waitErr)
	default:
	}
	if err := d.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("containerdtest: signalling containerd (pid %d) with %v: %w", d.cmd.Process.Pid, sig, err)
	}
	select {
	case <-d.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("containerdtest: containerd (pid %d) did not exit after %v: %w", d.cmd.Process.Pid, sig, ctx.Err())
	}
}

// Restart starts containerd again, after Kill, on the same config, root,
// state and sockets, and waits until its CRI service answers or ctx ends.
// The instance's own connection (Conn) dials again without waiting out its
// back-off. It is an error while containerd still runs, and
// after Stop.
func (c *Containerd) Restart(ctx context.Context) error {
	c.mu.Lock()
	d, stopped := c.proc, c.stopped
	c.mu.Unlock()
	switch {
	case stopped:
		return errors.New("containerdtest: Restart after Stop")
	case d == nil:
		return errors.New("containerdtest: Restart before containerd was started")
	}
	select {
	case <-d.exited:
	default:
		return fmt.Errorf("containerdtest: Restart: containerd (pid %d) is still running; Kill it first", d.cmd.Process.Pid)
	}
	if err := c.launch(); err != nil {
		return err
	}
	return c.waitReady(ctx)
}
