package containerdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/mountinfo"
)

// Stop tears the instance down and removes every trace of it, touching only
// what this instance created: it stops and removes every CRI pod sandbox (so
// the shims exit), stops containerd by PID (SIGTERM, then SIGKILL), kills any
// process left whose command line names the instance's directory or that
// sits in its cgroups, removes its cgroups, unmounts everything mounted under
// its directory (deepest first) and removes the directory. It is bounded by
// Options.StopTimeout; calling it again returns the first result.
func (c *Containerd) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Containerd) stop() error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StopTimeout)
	defer cancel()
	var errs []error
	sockets := c.ShimSockets()
	if c.conn != nil && c.ready && c.running() {
		sub, subCancel := context.WithTimeout(ctx, c.opts.StopTimeout/2)
		if err := c.removeSandboxes(sub); err != nil {
			// Not fatal: whatever is left is killed below.
			errs = append(errs, fmt.Errorf("removing pod sandboxes: %w", err))
		}
		subCancel()
	}
	if c.conn != nil {
		c.conn.Close()
	}
	if c.daemon() != nil {
		if err := c.stopContainerd(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.killLeftovers(ctx); err != nil {
		errs = append(errs, err)
	}
	// A shim that was killed leaves its socket behind.
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := c.removeCgroups(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := c.unmountAll(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("containerdtest: stopping %s: %w", c.Dir, errors.Join(errs...))
	}
	return nil
}

func (c *Containerd) running() bool {
	d := c.daemon()
	if d == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// removeSandboxes stops and removes every pod sandbox (with its containers).
func (c *Containerd) removeSandboxes(ctx context.Context) error {
	rt := c.RuntimeClient()
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range resp.GetItems() {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopContainerd sends SIGTERM to containerd's PID, then SIGKILL when it has
// not exited within half of what is left of ctx (at most 10s).
func (c *Containerd) stopContainerd(ctx context.Context) error {
	if !c.running() {
		return nil
	}
	d := c.daemon()
	grace := 10 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d)/2 < grace {
		grace = time.Until(d) / 2
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-d.exited:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-d.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("containerd (pid %d) did not exit after SIGKILL: %w", d.cmd.Process.Pid, ctx.Err())
	}
}

// ShimSockets returns the socket paths of the instance's running shims, read
// from the "address" file each shim leaves in its bundle directory
// (containerd 1.6) or from the bundle's bootstrap.json (containerd 2). They
// lie outside the instance's directory (both put them in
// /run/containerd/s), named by a hash of the instance's address.
func (c *Containerd) ShimSockets() []string {
	bundles := filepath.Join(c.State, "io.containerd.runtime.v2.task", "*", "*")
	files, _ := filepath.Glob(filepath.Join(bundles, "address"))
	var addrs []string
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			addrs = append(addrs, strings.TrimSpace(string(data)))
		}
	}
	files, _ = filepath.Glob(filepath.Join(bundles, "bootstrap.json"))
	for _, f := range files {
		var params struct {
			Address string `json:"address"`
		}
		if data, err := os.ReadFile(f); err == nil && json.Unmarshal(data, &params) == nil {
			addrs = append(addrs, params.Address)
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, addr := range addrs {
		if p, ok := strings.CutPrefix(addr, "unix://"); ok && filepath.IsAbs(p) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Processes returns the PIDs of live processes that belong to the instance:
// those whose command line names its directory (containerd, shims, runc)
// and those in its cgroups (containers). The calling process is never
// included.
func (c *Containerd) Processes() []int {
	self := os.Getpid()
	set := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	needle := []byte(c.Dir + "/")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, needle) && !zombie(pid) {
			set[pid] = true
		}
	}
	for _, pid := range cgroupPids(c.CgroupDirs()) {
		set[pid] = true
	}
	pids := make([]int, 0, len(set))
	for pid := range set {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

// zombie reports whether pid has exited (gone or a zombie awaiting its
// parent).
func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return true
	}
	return data[i+2] == 'Z' || data[i+2] == 'X'
}

// killLeftovers SIGKILLs the instance's remaining processes until every one
// of them has exited or ctx ends. Frozen cgroups are thawed first so the kill
// lands.
func (c *Containerd) killLeftovers(ctx context.Context) error {
	c.thaw()
	return killUntilGone(ctx, c.Processes)
}

// KillBelow SIGKILLs every process in the cgroup directory rel (relative
// to the instance's cgroup root, in every hierarchy) and below it, until
// none is left or ctx ends. It is for the containers a runtime keeps
// running when it should not: containerd 1.6 refuses to remove a
// container whose start timed out while its task still runs ("cannot
// delete running task"), and removes it once the task has exited.
func (c *Containerd) KillBelow(ctx context.Context, rel string) error {
	c.thaw()
	return killUntilGone(ctx, func() []int {
		var dirs []string
		for _, root := range c.CgroupDirs() {
			dirs = append(dirs, filepath.Join(root, rel))
		}
		return cgroupPids(dirs)
	})
}

// KillShims SIGKILLs the instance's shims (and with them the containers
// they run) until none is left or ctx ends; containerd, which stays up,
// then finds their tasks gone. It is the last resort for a container that
// containerd 1.6 keeps as a running task after its start timed out, which
// killing the container's processes does not end.
func (c *Containerd) KillShims(ctx context.Context) error {
	c.thaw()
	return killUntilGone(ctx, func() []int {
		var shims []int
		for _, pid := range c.Processes() {
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if err == nil && strings.HasPrefix(string(comm), "containerd-shim") {
				shims = append(shims, pid)
			}
		}
		return shims
	})
}

// cgroupPids returns the live processes in the cgroup directories dirs and
// below them, the calling process left out.
func cgroupPids(dirs []string) []int {
	self := os.Getpid()
	var pids []int
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != self && !zombie(pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// killUntilGone SIGKILLs the processes list returns until every one of
// them has exited or ctx ends. A killed process leaves its cgroup before
// it finishes exiting (a PID-namespace init may take a while to tear its
// namespaces down), so the processes once found are followed by PID and
// start time, not only rediscovered by list.
func killUntilGone(ctx context.Context, list func() []int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	pending := map[int]string{} // pid -> start time
	for {
		for _, pid := range list() {
			if _, ok := pending[pid]; !ok {
				pending[pid] = startTime(pid)
			}
		}
		var left []int
		for pid, start := range pending {
			if zombie(pid) || startTime(pid) != start {
				delete(pending, pid)
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			left = append(left, pid)
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Ints(left)
			return fmt.Errorf("processes %v still alive: %w", left, ctx.Err())
		case <-tick.C:
		}
	}
}

// startTime returns field 22 of /proc/<pid>/stat (the start time in clock
// ticks since boot), which tells a process from a later one with the same
// PID; "" when the process is gone.
func startTime(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return ""
	}
	// Fields after the command name start at field 3 (state).
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// cgroupMount is a mounted cgroup hierarchy.
type cgroupMount struct{ root, mountpoint string }

func cgroupMounts() []cgroupMount {
	var out []cgroupMount
	for _, m := range mountInfo() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, cgroupMount{root: m.root, mountpoint: m.mountpoint})
		}
	}
	return out
}

// CgroupDirs returns the existing directories of the instance's cgroup root,
// one per cgroup hierarchy it was created in.
func (c *Containerd) CgroupDirs() []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range cgroupMounts() {
		rel := c.CgroupRoot
		if m.root != "/" {
			if !strings.HasPrefix(rel, m.root+"/") {
				continue
			}
			rel = strings.TrimPrefix(rel, m.root)
		}
		dir := filepath.Join(m.mountpoint, rel)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

// thaw writes THAWED to every freezer.state below the instance's cgroups.
func (c *Containerd) thaw() {
	for _, dir := range c.CgroupDirs() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "freezer.state" {
				_ = os.WriteFile(p, []byte("THAWED"), 0)
			}
			return nil
		})
	}
}

// removeCgroups removes the instance's cgroup directories, deepest first,
// retrying while the kernel still counts exiting tasks in them.
func (c *Containerd) removeCgroups(ctx context.Context) error { return c.RemoveCgroupsBelow(ctx, "") }

// RemoveCgroupsBelow removes the directory rel (relative to the instance's
// cgroup root; "" for the root itself) and everything below it in every
// hierarchy, deepest first, retrying every 20ms while the kernel still
// counts exiting tasks in them, until ctx ends: what an agent's kubepods
// tree leaves once its pods are gone.
func (c *Containerd) RemoveCgroupsBelow(ctx context.Context, rel string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var last error
		for _, root := range c.CgroupDirs() {
			var dirs []string
			_ = filepath.WalkDir(filepath.Join(root, rel), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
					last = fmt.Errorf("removing cgroup %s: %w", d, err)
				}
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		case <-tick.C:
		}
	}
}

// Mounts returns the mount points under the instance's directory, deepest
// first.
func (c *Containerd) Mounts() []string {
	var out []string
	for _, m := range mountInfo() {
		if m.mountpoint == c.Dir || strings.HasPrefix(m.mountpoint, c.Dir+"/") {
			out = append(out, m.mountpoint)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out
}

// unmountAll unmounts everything under the instance's directory, deepest
// first; a mount that stays busy is detached.
func (c *Containerd) unmountAll() error {
	var last error
	for round := 0; round < 10; round++ {
		mounts := c.Mounts()
		if len(mounts) == 0 {
			return nil
		}
		last = nil
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				if err2 := syscall.Unmount(m, syscall.MNT_DETACH); err2 != nil {
					last = fmt.Errorf("unmounting %s: %w", m, err)
				}
			}
		}
	}
	if mounts := c.Mounts(); len(mounts) > 0 {
		return fmt.Errorf("still mounted: %v (last error: %v)", mounts, last)
	}
	return nil
}

type mountEntry struct{ root, mountpoint, fstype string }

// mountInfo reads the process's mount table.
func mountInfo() []mountEntry {
	ms, _ := mountinfo.Read(mountinfo.Self)
	out := make([]mountEntry, len(ms))
	for i, m := range ms {
		out[i] = mountEntry{root: m.Root, mountpoint: m.Mountpoint, fstype: m.FSType}
	}
	return out
}

// MakeCgroupRoot creates the instance's cgroup root in every mounted cgroup
// hierarchy, for a node agent that requires its cgroup root to exist (the
// kubelet's --cgroup-root); in the cpuset hierarchy it copies the parent's
// cpus and mems so that cgroups below can take tasks. Stop removes it as it
// removes the rest.
func (c *Containerd) MakeCgroupRoot() error {
	for _, m := range cgroupMounts() {
		rel := c.CgroupRoot
		if m.root != "/" {
			if !strings.HasPrefix(rel, m.root+"/") {
				continue
			}
			rel = strings.TrimPrefix(rel, m.root)
		}
		dir := filepath.Join(m.mountpoint, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("containerdtest: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil || len(bytes.TrimSpace(cur)) > 0 {
				continue // not the cpuset hierarchy, or already set
			}
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				return fmt.Errorf("containerdtest: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0); err != nil {
				return fmt.Errorf("containerdtest: %w", err)
			}
		}
	}
	return nil
}
