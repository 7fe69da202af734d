//go:build linux

package nodestatus

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// LinuxHostOptions configures NewLinuxHost. The path fields exist so that the
// host can be read from a container with the host's directories mounted
// elsewhere, and for tests.
type LinuxHostOptions struct {
	// ProcPath is where procfs is mounted. Default "/proc".
	ProcPath string
	// SysPath is where sysfs is mounted. Default "/sys".
	SysPath string
	// MachineIDPath is the machine-id file. Default "/etc/machine-id".
	MachineIDPath string
	// OSReleasePath is the os-release file. Default "/etc/os-release",
	// falling back to "/usr/lib/os-release" when that is missing.
	OSReleasePath string
	// NodeFSPath is the agent's root directory, whose file system is nodefs.
	// Default "/var/lib/kubelet", falling back to "/" while it does not exist.
	NodeFSPath string
	// ImageFSPath is the directory holding images, whose file system is
	// imagefs. Default "/var/lib/containerd", falling back to the nodefs path
	// while it does not exist.
	ImageFSPath string
	// DisableAddressDetection leaves HostFacts.IPs empty instead of choosing
	// the addresses of the default-route interfaces. Default false.
	DisableAddressDetection bool
}

// LinuxHost reads host facts from a Linux machine: /proc/meminfo and
// /proc/stat through github.com/prometheus/procfs, file systems and the
// kernel release through statfs(2) and uname(2) (golang.org/x/sys/unix), the
// other identifiers from their files under /proc, /sys and /etc. It keeps no
// state between calls and is safe for concurrent use.
type LinuxHost struct {
	opts             LinuxHostOptions
	nodeFSDefaulted  bool
	imageFSDefault   bool
	osReleaseDefault bool
}

var _ Host = (*LinuxHost)(nil)

// NewLinuxHost returns a Host that reads the machine it runs on.
func NewLinuxHost(opts LinuxHostOptions) (*LinuxHost, error) {
	h := &LinuxHost{}
	if opts.ProcPath == "" {
		opts.ProcPath = "/proc"
	}
	if opts.SysPath == "" {
		opts.SysPath = "/sys"
	}
	if opts.MachineIDPath == "" {
		opts.MachineIDPath = "/etc/machine-id"
	}
	if opts.OSReleasePath == "" {
		opts.OSReleasePath = "/etc/os-release"
		h.osReleaseDefault = true
	}
	if opts.NodeFSPath == "" {
		opts.NodeFSPath = "/var/lib/kubelet"
		h.nodeFSDefaulted = true
	}
	if opts.ImageFSPath == "" {
		opts.ImageFSPath = "/var/lib/containerd"
		h.imageFSDefault = true
	}
	for name, p := range map[string]string{
		"ProcPath": opts.ProcPath, "SysPath": opts.SysPath, "MachineIDPath": opts.MachineIDPath,
		"OSReleasePath": opts.OSReleasePath, "NodeFSPath": opts.NodeFSPath, "ImageFSPath": opts.ImageFSPath,
	} {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("nodestatus: LinuxHostOptions.%s must be an absolute path, not %q", name, p)
		}
	}
	h.opts = opts
	return h, nil
}

// Facts reads the host's facts now.
func (h *LinuxHost) Facts(ctx context.Context) (*HostFacts, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := &HostFacts{}
	miss := func(fact Fact, err error) { f.Missing = append(f.Missing, FactError{Fact: fact, Err: err}) }

	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		miss(FactHostname, err)
		miss(FactKernelVersion, err)
	} else {
		f.Hostname = unix.ByteSliceToString(uts.Nodename[:])
		f.KernelVersion = unix.ByteSliceToString(uts.Release[:])
		if f.Hostname == "" {
			miss(FactHostname, errors.New("uname reports an empty node name"))
		}
	}

	if !h.opts.DisableAddressDetection {
		for _, zero := range []net.IP{net.IPv4zero, net.IPv6zero} {
			if ip, err := utilnet.ResolveBindAddress(zero); err == nil && ip != nil && !ip.IsUnspecified() {
				f.IPs = append(f.IPs, ip)
			}
		}
		if len(f.IPs) == 0 {
			miss(FactAddresses, errors.New("no interface with a default route"))
		}
	}

	pfs, pfsErr := procfs.NewFS(h.opts.ProcPath)
	if pfsErr != nil {
		miss(FactCPU, pfsErr)
		miss(FactMemory, pfsErr)
	} else {
		if st, err := pfs.Stat(); err != nil {
			miss(FactCPU, err)
		} else if len(st.CPU) == 0 {
			miss(FactCPU, errors.New("no cpu lines in stat"))
		} else {
			f.CPUs = len(st.CPU)
		}
		if mi, err := pfs.Meminfo(); err != nil {
			miss(FactMemory, err)
		} else if mi.MemTotalBytes == nil || mi.MemAvailableBytes == nil {
			miss(FactMemory, errors.New("meminfo lacks MemTotal or MemAvailable"))
		} else {
			f.MemoryTotal = *mi.MemTotalBytes
			f.MemoryAvailable = *mi.MemAvailableBytes
			if mi.SwapTotalBytes != nil {
				f.SwapTotal = *mi.SwapTotalBytes
			}
		}
	}

	if hp, err := h.hugePages(); err != nil {
		miss(FactHugePages, err)
	} else {
		f.HugePages = hp
	}

	nodePath := h.opts.NodeFSPath
	if h.nodeFSDefaulted && !exists(nodePath) {
		nodePath = "/"
	}
	if st, err := statFS(nodePath); err != nil {
		miss(FactNodeFS, err)
	} else {
		f.NodeFS = st
	}
	imagePath := h.opts.ImageFSPath
	if h.imageFSDefault && !exists(imagePath) {
		imagePath = nodePath
	}
	if imagePath == nodePath && f.Err(FactNodeFS) == nil {
		f.ImageFS = f.NodeFS
	} else if st, err := statFS(imagePath); err != nil {
		miss(FactImageFS, err)
	} else {
		f.ImageFS = st
	}

	if max, used, err := h.pids(); err != nil {
		miss(FactPIDs, err)
	} else {
		f.PIDMax, f.PIDsInUse = max, used
	}

	if osImage, err := h.osImage(); err != nil {
		miss(FactOSImage, err)
	} else {
		f.OSImage = osImage
	}
	if id, err := readTrimmed(h.opts.MachineIDPath); err != nil {
		miss(FactMachineID, err)
	} else {
		f.MachineID = id
	}
	if id, err := readTrimmed(filepath.Join(h.opts.ProcPath, "sys/kernel/random/boot_id")); err != nil {
		miss(FactBootID, err)
	} else {
		f.BootID = id
	}
	// Readable only by root and absent on many virtual machines: empty then.
	f.SystemUUID, _ = readTrimmed(filepath.Join(h.opts.SysPath, "class/dmi/id/product_uuid"))
	return f, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func statFS(path string) (FSStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FSStats{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	bs := uint64(st.Bsize)
	return FSStats{
		Path:       path,
		Capacity:   st.Blocks * bs,
		Available:  st.Bavail * bs,
		Inodes:     st.Files,
		InodesFree: st.Ffree,
	}, nil
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

func readUint(path string) (uint64, error) {
	s, err := readTrimmed(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}

// hugePages reads /sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages.
// A kernel without huge page support has no such directory: no huge pages.
func (h *LinuxHost) hugePages() ([]HugePages, error) {
	dir := filepath.Join(h.opts.SysPath, "kernel/mm/hugepages")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []HugePages
	for _, e := range entries {
		name := e.Name()
		kb, ok := strings.CutPrefix(name, "hugepages-")
		if !ok {
			continue
		}
		kb, ok = strings.CutSuffix(kb, "kB")
		if !ok {
			continue
		}
		size, err := strconv.ParseUint(kb, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		n, err := readUint(filepath.Join(dir, name, "nr_hugepages"))
		if err != nil {
			return nil, err
		}
		out = append(out, HugePages{PageSize: size * 1024, Pages: n})
	}
	return out, nil
}

// pids returns the lower of pid_max and threads-max, and the number of tasks
// that exist (the fourth field of loadavg, "running/total").
func (h *LinuxHost) pids() (max, used uint64, err error) {
	pidMax, err := readUint(filepath.Join(h.opts.ProcPath, "sys/kernel/pid_max"))
	if err != nil {
		return 0, 0, err
	}
	if tm, err := readUint(filepath.Join(h.opts.ProcPath, "sys/kernel/threads-max")); err == nil && tm < pidMax {
		pidMax = tm
	}
	la, err := os.ReadFile(filepath.Join(h.opts.ProcPath, "loadavg"))
	if err != nil {
		return 0, 0, err
	}
	fields := strings.Fields(string(la))
	if len(fields) < 4 {
		return 0, 0, errors.New("loadavg has fewer than 4 fields")
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, 0, fmt.Errorf("loadavg: unexpected task field %q", fields[3])
	}
	used, err = strconv.ParseUint(total, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("loadavg: %w", err)
	}
	return pidMax, used, nil
}

func (h *LinuxHost) osImage() (string, error) {
	b, err := os.ReadFile(h.opts.OSReleasePath)
	if err != nil && h.osReleaseDefault && errors.Is(err, os.ErrNotExist) {
		b, err = os.ReadFile("/usr/lib/os-release")
	}
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PRETTY_NAME=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, `"'`)
		}
		if v != "" {
			return v, nil
		}
	}
	return "", errors.New("os-release has no PRETTY_NAME")
}
