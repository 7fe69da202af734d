package nodestatus

import (
	"context"
	"errors"
	"net"
)

// Host reports facts about the machine a node runs on. The default
// implementation reads them from the Linux host (see NewLinuxHost);
// nodestatustest.Host serves a fixed set for tests and simulated nodes.
type Host interface {
	// Facts returns what the host knows now. Facts that could not be read are
	// listed in HostFacts.Missing, each naming the fact; the other fields are
	// still valid. An error is returned only when nothing could be read (for
	// example when ctx has ended). The caller must not modify the result.
	Facts(ctx context.Context) (*HostFacts, error)
}

// Fact names one host fact, for errors and for HostFacts.Missing.
type Fact string

// The host facts the default setters use.
const (
	FactHostname      Fact = "hostname"
	FactAddresses     Fact = "addresses"
	FactCPU           Fact = "cpu"
	FactMemory        Fact = "memory"
	FactHugePages     Fact = "hugepages"
	FactNodeFS        Fact = "nodefs"
	FactImageFS       Fact = "imagefs"
	FactPIDs          Fact = "pids"
	FactKernelVersion Fact = "kernelVersion"
	FactOSImage       Fact = "osImage"
	FactMachineID     Fact = "machineID"
	FactBootID        Fact = "bootID"
)

// HostFacts is what a Host knows about the machine. Sizes are in bytes.
type HostFacts struct {
	// Hostname is the machine's host name as the kernel reports it.
	Hostname string
	// IPs are the addresses of the interfaces that carry the default routes,
	// IPv4 first when there is one. Used for the node's InternalIP when no
	// node IPs are configured.
	IPs []net.IP
	// CPUs is the number of online logical CPUs.
	CPUs int
	// MemoryTotal and MemoryAvailable are MemTotal and MemAvailable of
	// /proc/meminfo.
	MemoryTotal, MemoryAvailable uint64
	// SwapTotal is the swap space; 0 when there is none.
	SwapTotal uint64
	// HugePages lists the pre-allocated huge pages of each page size.
	HugePages []HugePages
	// NodeFS is the file system of the agent's root directory; its capacity is
	// the node's ephemeral-storage capacity.
	NodeFS FSStats
	// ImageFS is the file system holding container images; often the same as
	// NodeFS.
	ImageFS FSStats
	// PIDMax is the number of process IDs the kernel can hand out (the lower
	// of pid_max and threads-max), PIDsInUse the tasks that exist now.
	PIDMax, PIDsInUse uint64
	// KernelVersion is the kernel release (uname -r).
	KernelVersion string
	// OSImage is PRETTY_NAME of os-release, for example "Debian GNU/Linux 13 (trixie)".
	OSImage string
	// MachineID is /etc/machine-id.
	MachineID string
	// SystemUUID is the DMI product UUID; empty when it cannot be read (it is
	// readable only by root, and absent on many virtual machines).
	SystemUUID string
	// BootID changes on every boot (/proc/sys/kernel/random/boot_id).
	BootID string

	// Missing lists the facts that could not be read, and why.
	Missing []FactError
}

// HugePages is the number of pre-allocated huge pages of one page size.
type HugePages struct {
	PageSize uint64 // bytes, for example 2Mi
	Pages    uint64
}

// FSStats describes one file system, from statfs(2).
type FSStats struct {
	// Path is the directory the figures are for.
	Path string
	// Capacity is the file system's size, Available what an unprivileged user
	// may still write.
	Capacity, Available uint64
	// Inodes is the number of inodes, InodesFree the free ones.
	Inodes, InodesFree uint64
}

// FactError says that a host fact could not be read.
type FactError struct {
	Fact Fact
	Err  error
}

func (e FactError) Error() string { return "host fact " + string(e.Fact) + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e FactError) Unwrap() error { return e.Err }

// ErrFactUnknown is the cause recorded by hosts that do not know a fact at all.
var ErrFactUnknown = errors.New("not known")

// Err returns the FactError for fact when it is missing, or nil.
func (f *HostFacts) Err(fact Fact) error {
	for i := range f.Missing {
		if f.Missing[i].Fact == fact {
			return f.Missing[i]
		}
	}
	return nil
}

// Has reports whether fact was read.
func (f *HostFacts) Has(fact Fact) bool { return len(f.Missing) == 0 || f.Err(fact) == nil }

// errs returns the errors of the listed facts that are missing, joined.
func (f *HostFacts) errs(facts ...Fact) error {
	if len(f.Missing) == 0 {
		return nil
	}
	var errs []error
	for _, fact := range facts {
		if err := f.Err(fact); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeepCopy returns a copy of f that shares nothing with it.
func (f *HostFacts) DeepCopy() *HostFacts {
	if f == nil {
		return nil
	}
	out := *f
	if f.IPs != nil {
		out.IPs = make([]net.IP, len(f.IPs))
		for i, ip := range f.IPs {
			out.IPs[i] = append(net.IP(nil), ip...)
		}
	}
	out.HugePages = append([]HugePages(nil), f.HugePages...)
	out.Missing = append([]FactError(nil), f.Missing...)
	return &out
}
