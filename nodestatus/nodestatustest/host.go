package nodestatustest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/nodekit/nodekit/nodestatus"
)

// Host is a nodestatus.Host that serves the facts it was last given.
type Host struct {
	mu    sync.Mutex // serialises writers
	facts atomic.Pointer[nodestatus.HostFacts]
}

var _ nodestatus.Host = (*Host)(nil)

// NewHost returns a Host serving a copy of facts.
func NewHost(facts nodestatus.HostFacts) *Host {
	h := &Host{}
	h.facts.Store(facts.DeepCopy())
	return h
}

// Facts returns the current facts. The result is shared: do not modify it.
func (h *Host) Facts(ctx context.Context) (*nodestatus.HostFacts, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return h.facts.Load(), nil
}

// Set replaces the facts with a copy of facts.
func (h *Host) Set(facts nodestatus.HostFacts) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.facts.Store(facts.DeepCopy())
}

// Update changes the facts: fn gets a copy to modify, which then replaces
// them. Passes already running keep the facts they read.
func (h *Host) Update(fn func(f *nodestatus.HostFacts)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.facts.Load().DeepCopy()
	fn(f)
	h.facts.Store(f)
}

// SetMissing marks fact as unreadable with err (nil: nodestatus.ErrFactUnknown).
func (h *Host) SetMissing(fact nodestatus.Fact, err error) {
	if err == nil {
		err = nodestatus.ErrFactUnknown
	}
	h.Update(func(f *nodestatus.HostFacts) {
		f.Missing = append(f.Missing, nodestatus.FactError{Fact: fact, Err: err})
	})
}

// Facts returns a plausible, healthy set of facts for a simulated node
// called name: 4 CPUs, 16Gi of memory (12Gi available), a 100Gi nodefs and
// imagefs (80Gi available), no huge pages, and an address (10.x.y.z),
// machine ID, system UUID and boot ID derived from the name, so that nodes
// differ and a node's facts are the same in every run. Addresses come from
// 24 bits of a hash: in a fleet of thousands two nodes may share one, so set
// IPs where that matters.
func Facts(name string) nodestatus.HostFacts {
	s := sha256.Sum256([]byte(name))
	b := sha256.Sum256([]byte(name + "/boot"))
	sum, boot := s[:16], b[:16]
	const gi = 1 << 30
	fs := nodestatus.FSStats{Path: "/var/lib/kubelet", Capacity: 100 * gi, Available: 80 * gi, Inodes: 6_553_600, InodesFree: 6_000_000}
	return nodestatus.HostFacts{
		Hostname:        name,
		IPs:             []net.IP{net.IPv4(10, s[16], s[17], 1+s[18]%254).To4()},
		CPUs:            4,
		MemoryTotal:     16 * gi,
		MemoryAvailable: 12 * gi,
		NodeFS:          fs,
		ImageFS:         fs,
		PIDMax:          4_194_304,
		PIDsInUse:       300,
		KernelVersion:   "6.12.0-nodekit",
		OSImage:         "nodekit simulated Linux",
		MachineID:       fmt.Sprintf("%x", sum),
		SystemUUID:      uuid(sum),
		BootID:          uuid(boot),
	}
}

func uuid(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
