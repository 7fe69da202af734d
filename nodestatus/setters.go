package nodestatus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// nodeAddress sets status.addresses: the InternalIP(s), the ExternalIP(s),
// then the Hostname.
type nodeAddress struct {
	src       *sources
	hostname  string // override, lower-cased; empty: from the host
	internal  []string
	external  []string
	preferV4  bool
	detect    bool // no usable NodeIPs configured
	mu        sync.Mutex
	scratch   []corev1.NodeAddress
	lastIP    net.IP
	lastIPStr string
}

func newNodeAddress(o Options, src *sources) (*nodeAddress, error) {
	a := &nodeAddress{src: src, hostname: strings.ToLower(strings.TrimSpace(o.Hostname)), preferV4: true}
	switch {
	case len(o.NodeIPs) == 0:
		a.detect = true
	case len(o.NodeIPs) == 1 && o.NodeIPs[0].IsUnspecified():
		a.detect = true
		a.preferV4 = o.NodeIPs[0].To4() != nil
	default:
		for _, ip := range o.NodeIPs {
			a.internal = append(a.internal, ip.String())
		}
	}
	for _, ip := range o.ExternalIPs {
		a.external = append(a.external, ip.String())
	}
	return a, nil
}

func (a *nodeAddress) SetStatus(ctx context.Context, node *corev1.Node) error {
	var errs []error
	hostname := a.hostname
	var facts *HostFacts
	if hostname == "" || a.detect {
		f, err := a.src.facts(ctx)
		if err != nil {
			return err
		}
		facts = f
	}
	if hostname == "" {
		if err := facts.Err(FactHostname); err != nil {
			errs = append(errs, err)
		} else {
			hostname = strings.ToLower(facts.Hostname)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	want := a.scratch[:0]
	if a.detect {
		ip := a.detectIP(hostname, facts)
		if ip == "" {
			errs = append(errs, fmt.Errorf("can't get ip address of node %s: %w", node.Name, cmp.Or(facts.Err(FactAddresses), error(errNoAddress))))
			return errors.Join(errs...)
		}
		want = append(want, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	} else {
		for _, ip := range a.internal {
			want = append(want, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
	}
	for _, ip := range a.external {
		want = append(want, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
	}
	if hostname != "" {
		want = append(want, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostname})
	}
	a.scratch = want
	if !slices.Equal(node.Status.Addresses, want) {
		node.Status.Addresses = slices.Clone(want)
	}
	return errors.Join(errs...)
}

// maybeIP is a cheap test that spares parsing (and its error's allocation)
// for host names that cannot be addresses.
func maybeIP(s string) bool {
	if strings.Contains(s, "%") {
		return true // an IPv6 zone may hold any letters: let the parser decide
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF.:", c) {
			return false
		}
	}
	return s != ""
}

var errNoAddress = errors.New("the host reports no address of a default-route interface")

// detectIP picks the InternalIP as kubelet does without --node-ip: the
// hostname when it is an IP address, else the host's default-route address
// of the preferred family, else of the other family.
func (a *nodeAddress) detectIP(hostname string, facts *HostFacts) string {
	if maybeIP(hostname) {
		if ip := net.ParseIP(hostname); ip != nil {
			return ip.String()
		}
	}
	var pick net.IP
	for _, ip := range facts.IPs {
		if (ip.To4() != nil) == a.preferV4 {
			pick = ip
			break
		}
		if pick == nil {
			pick = ip
		}
	}
	if pick == nil {
		return ""
	}
	if !pick.Equal(a.lastIP) {
		a.lastIP, a.lastIPStr = pick, pick.String()
	}
	return a.lastIPStr
}

// machineInfo sets capacity and allocatable of cpu, memory, pods,
// ephemeral-storage and hugepages-*, and nodeInfo's machineID, systemUUID,
// bootID and swap. Resources of other names are left to their owners.
type machineInfo struct {
	src                          *sources
	maxPods, podsPerCore         int
	systemReserved, kubeReserved corev1.ResourceList
	thresholds                   thresholds

	mu             sync.Mutex
	hugePageNames  map[uint64]corev1.ResourceName
	rebootReported bool
}

func (m *machineInfo) hugePageName(size uint64) corev1.ResourceName {
	if n, ok := m.hugePageNames[size]; ok {
		return n
	}
	if m.hugePageNames == nil {
		m.hugePageNames = map[uint64]corev1.ResourceName{}
	}
	n := corev1.ResourceName(corev1.ResourceHugePagesPrefix + resource.NewQuantity(int64(size), resource.BinarySI).String())
	m.hugePageNames[size] = n
	return n
}

func (m *machineInfo) SetStatus(ctx context.Context, node *corev1.Node) error {
	facts, err := m.src.facts(ctx)
	if err != nil {
		// Nothing is known: report no capacity, so the node is not Ready.
		facts = &HostFacts{Missing: []FactError{
			{FactCPU, err}, {FactMemory, err}, {FactHugePages, err}, {FactNodeFS, err},
			{FactMachineID, err}, {FactBootID, err},
		}}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if node.Status.Capacity == nil {
		node.Status.Capacity = corev1.ResourceList{}
	}
	if node.Status.Allocatable == nil {
		node.Status.Allocatable = corev1.ResourceList{}
	}
	capacity, alloc := node.Status.Capacity, node.Status.Allocatable
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	// note records a missing fact, unless nothing at all could be read.
	note := func(e error) {
		if err == nil {
			errs = append(errs, e)
		}
	}
	// set puts a resource's capacity and allocatable (capacity less what is
	// reserved, never negative).
	set := func(name corev1.ResourceName, q resource.Quantity, raw uint64) {
		capacity[name] = q
		a := q.DeepCopy()
		if r, ok := m.systemReserved[name]; ok {
			a.Sub(r)
		}
		if r, ok := m.kubeReserved[name]; ok {
			a.Sub(r)
		}
		if r := m.thresholds.reservation(name, raw); r > 0 {
			a.Sub(*resource.NewQuantity(r, a.Format))
		}
		if a.Sign() < 0 {
			a.Set(0)
		}
		alloc[name] = a
	}
	unset := func(name corev1.ResourceName) {
		delete(capacity, name)
		delete(alloc, name)
	}

	if e := facts.Err(FactCPU); e != nil {
		note(e)
		unset(corev1.ResourceCPU)
	} else {
		set(corev1.ResourceCPU, *resource.NewMilliQuantity(int64(facts.CPUs)*1000, resource.DecimalSI), uint64(facts.CPUs))
	}
	pods := m.maxPods
	if m.podsPerCore > 0 && facts.Err(FactCPU) == nil {
		pods = min(pods, m.podsPerCore*facts.CPUs)
	}
	set(corev1.ResourcePods, *resource.NewQuantity(int64(pods), resource.DecimalSI), uint64(pods))
	memoryKnown := facts.Err(FactMemory) == nil
	if e := facts.Err(FactMemory); e != nil {
		note(e)
		unset(corev1.ResourceMemory)
	} else {
		set(corev1.ResourceMemory, *resource.NewQuantity(int64(facts.MemoryTotal), resource.BinarySI), facts.MemoryTotal)
	}
	if e := facts.Err(FactNodeFS); e != nil {
		note(e)
		unset(corev1.ResourceEphemeralStorage)
	} else {
		set(corev1.ResourceEphemeralStorage, *resource.NewQuantity(int64(facts.NodeFS.Capacity), resource.DecimalSI), facts.NodeFS.Capacity)
	}
	if e := facts.Err(FactHugePages); e != nil {
		note(e)
	} else {
		var hugeTotal int64
		for _, hp := range facts.HugePages {
			total := int64(hp.PageSize * hp.Pages)
			hugeTotal += total
			set(m.hugePageName(hp.PageSize), *resource.NewQuantity(total, resource.BinarySI), uint64(total))
		}
		// Page sizes the host no longer has are ours to remove.
		for name := range capacity {
			if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && !m.hasHugePage(facts, name) {
				unset(name)
			}
		}
		// Huge pages are taken out of allocatable memory, as kubelet does.
		if memoryKnown && hugeTotal > 0 {
			a := alloc[corev1.ResourceMemory]
			a.Sub(*resource.NewQuantity(hugeTotal, resource.BinarySI))
			if a.Sign() < 0 {
				a.Set(0)
			}
			alloc[corev1.ResourceMemory] = a
		}
	}

	info := &node.Status.NodeInfo
	if e := facts.Err(FactMachineID); e != nil {
		note(e)
	} else {
		info.MachineID = facts.MachineID
	}
	if err == nil {
		info.SystemUUID = facts.SystemUUID
	}
	if e := facts.Err(FactBootID); e != nil {
		note(e)
	} else {
		if info.BootID != "" && info.BootID != facts.BootID && !m.rebootReported {
			m.rebootReported = true
			m.src.event(node, corev1.EventTypeWarning, "Rebooted", "Node %s has been rebooted, boot id: %s", node.Name, facts.BootID)
		}
		info.BootID = facts.BootID
	}
	if memoryKnown && facts.SwapTotal > 0 {
		if info.Swap == nil || info.Swap.Capacity == nil || *info.Swap.Capacity != int64(facts.SwapTotal) {
			swap := int64(facts.SwapTotal)
			info.Swap = &corev1.NodeSwapStatus{Capacity: &swap}
		}
	}
	return errors.Join(errs...)
}

func (m *machineInfo) hasHugePage(facts *HostFacts, name corev1.ResourceName) bool {
	for _, hp := range facts.HugePages {
		if m.hugePageName(hp.PageSize) == name {
			return true
		}
	}
	return false
}

// versionInfo sets nodeInfo's kernelVersion, osImage,
// containerRuntimeVersion ("<runtime name>://<version>") and kubeletVersion,
// and clears the deprecated kubeProxyVersion.
type versionInfo struct {
	src            *sources
	kubeletVersion string

	mu        sync.Mutex
	knownName string // the runtime's name as last reported
	cacheKey  [2]string
	cacheStr  string
}

func (v *versionInfo) SetStatus(ctx context.Context, node *corev1.Node) error {
	var errs []error
	info := &node.Status.NodeInfo
	if facts, err := v.src.facts(ctx); err != nil {
		errs = append(errs, err)
	} else {
		if e := facts.Err(FactKernelVersion); e != nil {
			errs = append(errs, e)
		} else {
			info.KernelVersion = facts.KernelVersion
		}
		if e := facts.Err(FactOSImage); e != nil {
			errs = append(errs, e)
		} else {
			info.OSImage = facts.OSImage
		}
	}
	v.mu.Lock()
	version := "Unknown"
	if rv, err := v.src.version(ctx); err != nil {
		errs = append(errs, fmt.Errorf("container runtime version: %w", err))
	} else {
		v.knownName, version = rv.RuntimeName, rv.RuntimeVersion
	}
	name := cmp.Or(v.knownName, "unknown")
	// The string is built (and the version parsed) only when the runtime's
	// answer changed.
	if key := [2]string{name, version}; key != v.cacheKey || v.cacheStr == "" {
		v.cacheKey, v.cacheStr = key, name+"://"+normalizeVersion(version)
	}
	info.ContainerRuntimeVersion = v.cacheStr
	v.mu.Unlock()
	info.KubeletVersion = v.kubeletVersion
	info.KubeProxyVersion = ""
	return errors.Join(errs...)
}

// normalizeVersion reads a runtime's version as kubelet does: as a semantic
// version ("v1.7.24" is 1.7.24), else as a generic one, whose text after the
// numbers is dropped ("1.6.20~ds1" is 1.6.20). A version that is neither is
// kept as it is.
func normalizeVersion(s string) string {
	if v, err := utilversion.ParseSemantic(s); err == nil {
		return v.String()
	}
	if v, err := utilversion.ParseGeneric(s); err == nil {
		return v.String()
	}
	return s
}

func daemonEndpoints(port int32) StatusSetter {
	return StatusSetterFunc(func(_ context.Context, node *corev1.Node) error {
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		return nil
	})
}

// images sets status.images: at most max images, the largest first (equal
// sizes by ID, descending, as kubelet sorts), each with at most maxNames
// names, digests first.
type images struct {
	src           *sources
	max, maxNames int

	mu     sync.Mutex
	lastIn []*runtimeapi.Image // the runtime's last list, as returned
	sorted []*runtimeapi.Image // lastIn sorted and cut to max
}

func (im *images) SetStatus(ctx context.Context, node *corev1.Node) error {
	list, err := im.src.images(ctx)
	if err != nil {
		// Keep the images last reported, as kubelet does: it reports its
		// cache of the last good listing.
		return fmt.Errorf("listing images (keeping the last list): %w", err)
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	// Sort only when the runtime's answer changed (a runtime that keeps its
	// list, like a fake, answers with the same objects).
	if !slices.Equal(list, im.lastIn) {
		im.lastIn = append(im.lastIn[:0], list...)
		sorted := append(im.sorted[:0], list...)
		slices.SortFunc(sorted, func(a, b *runtimeapi.Image) int {
			if c := cmp.Compare(b.GetSize(), a.GetSize()); c != 0 {
				return c
			}
			return strings.Compare(b.GetId(), a.GetId())
		})
		if im.max >= 0 && len(sorted) > im.max {
			clear(sorted[im.max:])
			sorted = sorted[:im.max]
		}
		im.sorted = sorted
	}
	sorted := im.sorted

	if im.equal(node.Status.Images, sorted) {
		return nil
	}
	if len(sorted) == 0 {
		node.Status.Images = nil
		return nil
	}
	out := make([]corev1.ContainerImage, len(sorted))
	for i, img := range sorted {
		n := min(len(img.RepoDigests)+len(img.RepoTags), im.maxNames)
		names := make([]string, 0, n)
		names = append(names, img.RepoDigests[:min(len(img.RepoDigests), n)]...)
		names = append(names, img.RepoTags[:min(len(img.RepoTags), n-len(names))]...)
		if len(names) == 0 {
			names = nil
		}
		out[i] = corev1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())}
	}
	node.Status.Images = out
	return nil
}

// equal reports whether have already lists want as this setter would.
func (im *images) equal(have []corev1.ContainerImage, want []*runtimeapi.Image) bool {
	if len(have) != len(want) {
		return false
	}
	for i, img := range want {
		h := &have[i]
		if h.SizeBytes != int64(img.GetSize()) {
			return false
		}
		n := min(len(img.RepoDigests)+len(img.RepoTags), im.maxNames)
		if len(h.Names) != n {
			return false
		}
		for j, name := range h.Names {
			var w string
			if j < len(img.RepoDigests) {
				w = img.RepoDigests[j]
			} else {
				w = img.RepoTags[j-len(img.RepoDigests)]
			}
			if name != w {
				return false
			}
		}
	}
	return true
}

func goRuntime(_ context.Context, node *corev1.Node) error {
	node.Status.NodeInfo.OperatingSystem = goruntime.GOOS
	node.Status.NodeInfo.Architecture = goruntime.GOARCH
	return nil
}

// runtimeHandlers sets status.runtimeHandlers from the runtime's status,
// sorted by name, while the runtime is ready; otherwise it leaves the last
// reported handlers, as kubelet does.
type runtimeHandlers struct{ src *sources }

func (r runtimeHandlers) SetStatus(ctx context.Context, node *corev1.Node) error {
	st, err := r.src.status(ctx)
	if err != nil || !runtimeReady(st) {
		return nil // Ready reports the runtime's trouble
	}
	hs := st.GetRuntimeHandlers()
	if handlersEqual(node.Status.RuntimeHandlers, hs) {
		return nil
	}
	if len(hs) == 0 {
		node.Status.RuntimeHandlers = nil
		return nil
	}
	out := make([]corev1.NodeRuntimeHandler, len(hs))
	for i, h := range hs {
		rro, userns := h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces()
		out[i] = corev1.NodeRuntimeHandler{Name: h.GetName(), Features: &corev1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns,
		}}
	}
	slices.SortFunc(out, func(a, b corev1.NodeRuntimeHandler) int { return strings.Compare(a.Name, b.Name) })
	node.Status.RuntimeHandlers = out
	return nil
}

func handlersEqual(have []corev1.NodeRuntimeHandler, want []*runtimeapi.RuntimeHandler) bool {
	if len(have) != len(want) {
		return false
	}
	for _, w := range want {
		i := slices.IndexFunc(have, func(h corev1.NodeRuntimeHandler) bool { return h.Name == w.GetName() })
		if i < 0 {
			return false
		}
		f := have[i].Features
		if f == nil || f.RecursiveReadOnlyMounts == nil || f.UserNamespaces == nil ||
			*f.RecursiveReadOnlyMounts != w.GetFeatures().GetRecursiveReadOnlyMounts() ||
			*f.UserNamespaces != w.GetFeatures().GetUserNamespaces() {
			return false
		}
	}
	// have must also be sorted, as this setter writes it.
	return slices.IsSortedFunc(have, func(a, b corev1.NodeRuntimeHandler) int { return strings.Compare(a.Name, b.Name) })
}

func runtimeReady(st *runtimeapi.StatusResponse) bool {
	c := runtimeCondition(st.GetStatus(), runtimeapi.RuntimeReady)
	return c != nil && c.Status
}

// nodeFeatures sets status.features from the features the runtime reports
// while it is ready; a runtime that reports none leaves the field alone.
type nodeFeatures struct{ src *sources }

func (n nodeFeatures) SetStatus(ctx context.Context, node *corev1.Node) error {
	st, err := n.src.status(ctx)
	if err != nil || !runtimeReady(st) || st.GetFeatures() == nil {
		return nil
	}
	sgp := st.GetFeatures().GetSupplementalGroupsPolicy()
	if f := node.Status.Features; f != nil && f.SupplementalGroupsPolicy != nil && *f.SupplementalGroupsPolicy == sgp {
		return nil
	}
	node.Status.Features = &corev1.NodeFeatures{SupplementalGroupsPolicy: &sgp}
	return nil
}

func volumesInUse(fn func() []corev1.UniqueVolumeName) StatusSetter {
	return StatusSetterFunc(func(_ context.Context, node *corev1.Node) error {
		if fn != nil {
			node.Status.VolumesInUse = fn()
		}
		return nil
	})
}

// PodCIDR returns a setter that passes the node's pod CIDRs
// (spec.podCIDRs, joined with ",") to the runtime through
// UpdateRuntimeConfig when they change, as kubelet does before it computes a
// status: once per change, and again at the next pass when the call failed.
// A node without pod CIDRs is left alone. It sets nothing in the status.
// DefaultSetters includes it, first, when Options.Runtime has
// UpdateRuntimeConfig.
func PodCIDR(rt runtime.RuntimeConfigUpdater) StatusSetter { return &podCIDR{rt: rt} }

type podCIDR struct {
	rt runtime.RuntimeConfigUpdater

	mu   sync.Mutex
	sent string // the CIDRs the runtime last accepted
}

func (p *podCIDR) SetStatus(ctx context.Context, node *corev1.Node) error {
	if len(node.Spec.PodCIDRs) == 0 {
		return nil
	}
	cidrs := strings.Join(node.Spec.PodCIDRs, ",")
	p.mu.Lock()
	defer p.mu.Unlock()
	if cidrs == p.sent {
		return nil
	}
	cfg := &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidrs}}
	if err := p.rt.UpdateRuntimeConfig(ctx, cfg); err != nil {
		return fmt.Errorf("failed to update pod CIDR %s: %w", cidrs, err)
	}
	p.sent = cidrs
	return nil
}
