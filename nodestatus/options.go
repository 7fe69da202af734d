package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/pressure"
	"github.com/nodekit/nodekit/runtime"
)

// RuntimeInfo is the part of the container runtime the default setters use:
// its name and version, its readiness, handlers and features, and its images.
// The methods have the signatures of runtime.Runtime, so a runtime.Runtime
// (or anything that has these three methods) will do.
type RuntimeInfo interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// HealthCheck is a check of the agent's own health. While it fails, the node
// is not Ready and the Ready condition's message says
// "<Name> is not healthy: <error>", as kubelet reports its PLEG.
type HealthCheck struct {
	Name string
	// Check returns nil when healthy. It should be quick and must not block
	// on the runtime or the network.
	Check func(ctx context.Context) error
}

// The names of the default setters, in the order DefaultSetters returns them.
const (
	SetterPodCIDR         = "PodCIDR" // only when Options.Runtime has UpdateRuntimeConfig
	SetterNodeAddress     = "NodeAddress"
	SetterMachineInfo     = "MachineInfo"
	SetterVersionInfo     = "VersionInfo"
	SetterDaemonEndpoints = "DaemonEndpoints"
	SetterImages          = "Images"
	SetterGoRuntime       = "GoRuntime"
	SetterRuntimeHandlers = "RuntimeHandlers"
	SetterNodeFeatures    = "NodeFeatures"
	SetterMemoryPressure  = "MemoryPressure"
	SetterDiskPressure    = "DiskPressure"
	SetterPIDPressure     = "PIDPressure"
	SetterReady           = "Ready"
	SetterVolumesInUse    = "VolumesInUse"
)

// DefaultKubeletVersion is what the default setters report as
// nodeInfo.kubeletVersion unless Options.KubeletVersion says otherwise: the
// Kubernetes version whose kubelet nodekit follows, with "+nodekit" as build
// metadata, so that version-skew checks that parse it as semantic version
// treat the node as that kubelet (build metadata does not take part in
// comparisons), and a reader still sees it is not kubelet.
const DefaultKubeletVersion = "v1.37.2+nodekit"

// Defaults of Options, as kubelet's.
const (
	DefaultMaxPods                  = 110
	DefaultKubeletPort              = 10250
	DefaultMaxImages                = 50
	DefaultMaxNamesPerImage         = 5
	DefaultPressureTransitionPeriod = pressure.DefaultTransitionPeriod
)

// DefaultEvictionHard returns kubelet's hard eviction thresholds on Linux:
// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
// imagefs.available<15%, imagefs.inodesFree<5%.
func DefaultEvictionHard() map[string]string { return pressure.DefaultEvictionHard() }

// Options configures DefaultSetters. The zero value of a field means its
// default, stated in its comment.
type Options struct {
	// Hostname is reported as the node's Hostname address. Default: the host's
	// hostname (HostFacts.Hostname), lower-cased, as kubelet does.
	Hostname string
	// NodeIPs are the node's InternalIP addresses, like kubelet's --node-ip: at
	// most two, and two only when one is IPv4 and the other IPv6 (dual-stack,
	// the first is the primary). A single unspecified address (0.0.0.0 or ::)
	// means "detect, preferring this family". Default: detect: the Hostname
	// when it is an IP address, else the host's default-route address
	// (HostFacts.IPs), IPv4 preferred. Unlike kubelet, nodekit does not check
	// that the addresses belong to this machine, so that simulated nodes may
	// use any address; it does reject loopback, multicast and link-local ones.
	NodeIPs []net.IP
	// ExternalIPs are reported as ExternalIP addresses, after the internal
	// ones. Default none.
	ExternalIPs []net.IP
	// Host supplies the host's facts. Default: NewLinuxHost with its defaults
	// (nodefs /var/lib/kubelet, falling back to /).
	Host Host
	// Runtime supplies the runtime's version, status and images. Required.
	Runtime RuntimeInfo
	// RuntimeStatus, when set, supplies the runtime's status as another
	// component last observed it (podsync/cri's syncer observes it on every
	// relist), so that the setters do not ask the runtime a second time:
	// Ready, RuntimeHandlers and NodeFeatures read it instead of calling
	// Runtime.Status, and Ready dates the runtime's last good answer by the
	// observation's time. Default nil: each pass asks Runtime.Status.
	RuntimeStatus RuntimeStatusSource
	// MaxPods is the pods capacity. Default 110.
	MaxPods int
	// PodsPerCore, when positive, caps pods capacity at PodsPerCore times the
	// CPU count. Default 0: no cap.
	PodsPerCore int
	// SystemReserved and KubeReserved are subtracted from capacity to give
	// allocatable, as kubelet's --system-reserved and --kube-reserved.
	// Default none.
	SystemReserved, KubeReserved corev1.ResourceList
	// EvictionHard holds the hard eviction thresholds, keyed by signal, each
	// a quantity ("100Mi") or a percentage of capacity ("10%"). They drive
	// the pressure conditions, and memory.available and nodefs.available are
	// also subtracted from allocatable. Signals: memory.available,
	// nodefs.available, nodefs.inodesFree, imagefs.available,
	// imagefs.inodesFree, pid.available. Default (nil):
	// DefaultEvictionHard(). An empty, non-nil map means no thresholds.
	EvictionHard map[string]string
	// PressureTransitionPeriod is how long a pressure condition stays True
	// after the pressure was last seen, as kubelet's
	// --eviction-pressure-transition-period. Default 5m; at least 1s, at
	// most 1h.
	PressureTransitionPeriod time.Duration
	// KubeletVersion is reported as nodeInfo.kubeletVersion. Default
	// DefaultKubeletVersion.
	KubeletVersion string
	// KubeletPort is reported as the kubelet daemon endpoint. Default 10250.
	KubeletPort int32
	// MaxImages is how many images the node's status lists at most, the
	// largest first. Default 50; -1 lists all. To list none, remove the
	// Images setter.
	MaxImages int
	// MaxNamesPerImage is how many names (digests first, then tags) each
	// listed image has at most. Default 5.
	MaxNamesPerImage int
	// HealthChecks make the node NotReady while one fails. Default none.
	HealthChecks []HealthCheck
	// RuntimeDownAfter is how long after the runtime's last good status
	// check Ready reports "container runtime is down". Default
	// DefaultRuntimeDownAfter (30s, kubelet's, which it does not let one
	// change); at least 1s, at most 1h.
	RuntimeDownAfter time.Duration
	// VolumesInUse, when set, supplies status.volumesInUse. Default nil: the
	// field is left as it is.
	VolumesInUse func() []corev1.UniqueVolumeName
	// Recorder, when set, receives kubelet's node events: NodeReady,
	// NodeNotReady, NodeHasSufficientMemory and its kin, and Rebooted.
	// Default nil: no events.
	Recorder record.EventRecorder
	// Clock gives the condition times. Default clock.RealClock{}.
	Clock clock.PassiveClock
}

// DefaultSetters returns kubelet's default status setters, in kubelet's
// order, each under its Setter* name; see the package documentation for
// what each one sets. The setters keep state between passes (pressure
// conditions' transition periods, the last boot ID), so build one list per
// node. A list is safe for concurrent use, but passes are meant to run one
// at a time.
func DefaultSetters(opts Options) (Setters, error) {
	o, err := opts.complete()
	if err != nil {
		return nil, err
	}
	src := &sources{host: o.Host, runtime: o.Runtime, statusSource: o.RuntimeStatus, recorder: o.Recorder}
	var thresholds thresholds
	if opts.EvictionHard == nil {
		thresholds = defaultThresholds() // parsed once, shared: read-only
	} else if thresholds, err = parseThresholds(o.EvictionHard); err != nil {
		return nil, err
	}
	addr, err := newNodeAddress(o, src)
	if err != nil {
		return nil, err
	}
	mk := func(name string, s StatusSetter) Named { return Named{Name: name, StatusSetter: s} }
	pressureOf := func(c corev1.NodeConditionType) StatusSetter {
		spec, _ := pressure.LookupCondition(c)
		return &pressureSetter{spec: spec, src: src, clock: o.Clock, period: o.PressureTransitionPeriod, thresholds: thresholds.forCondition(c)}
	}
	var list Setters
	if u, ok := o.Runtime.(runtime.RuntimeConfigUpdater); ok {
		list = append(list, mk(SetterPodCIDR, PodCIDR(u)))
	}
	return append(list,
		mk(SetterNodeAddress, addr),
		mk(SetterMachineInfo, &machineInfo{src: src, maxPods: o.MaxPods, podsPerCore: o.PodsPerCore,
			systemReserved: o.SystemReserved, kubeReserved: o.KubeReserved, thresholds: thresholds}),
		mk(SetterVersionInfo, &versionInfo{src: src, kubeletVersion: o.KubeletVersion}),
		mk(SetterDaemonEndpoints, daemonEndpoints(o.KubeletPort)),
		mk(SetterImages, &images{src: src, max: o.MaxImages, maxNames: o.MaxNamesPerImage}),
		mk(SetterGoRuntime, StatusSetterFunc(goRuntime)),
		mk(SetterRuntimeHandlers, runtimeHandlers{src: src}),
		mk(SetterNodeFeatures, nodeFeatures{src: src}),
		mk(SetterMemoryPressure, pressureOf(corev1.NodeMemoryPressure)),
		mk(SetterDiskPressure, pressureOf(corev1.NodeDiskPressure)),
		mk(SetterPIDPressure, pressureOf(corev1.NodePIDPressure)),
		mk(SetterReady, &ready{src: src, clock: o.Clock, healthChecks: o.HealthChecks, downAfter: o.RuntimeDownAfter}),
		mk(SetterVolumesInUse, volumesInUse(o.VolumesInUse)),
	), nil
}

// complete fills in defaults and validates, naming the field at fault.
func (opts Options) complete() (Options, error) {
	o := opts
	if o.Runtime == nil {
		return o, optcheck.Required("nodestatus: Options.Runtime")
	}
	if o.Host == nil {
		h, err := NewLinuxHost(LinuxHostOptions{})
		if err != nil {
			return o, fmt.Errorf("nodestatus: Options.Host: %w", err)
		}
		o.Host = h
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	switch {
	case o.MaxPods == 0:
		o.MaxPods = DefaultMaxPods
	case o.MaxPods < 0:
		return o, optcheck.AtLeast("nodestatus", "MaxPods", o.MaxPods, 1)
	}
	if o.PodsPerCore < 0 {
		return o, optcheck.AtLeast("nodestatus", "PodsPerCore", o.PodsPerCore, 0)
	}
	switch {
	case o.PressureTransitionPeriod == 0:
		o.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	case o.PressureTransitionPeriod < time.Second || o.PressureTransitionPeriod > time.Hour:
		return o, optcheck.Range("nodestatus: Options.PressureTransitionPeriod", o.PressureTransitionPeriod, time.Second, time.Hour)
	}
	switch {
	case o.RuntimeDownAfter == 0:
		o.RuntimeDownAfter = DefaultRuntimeDownAfter
	case o.RuntimeDownAfter < time.Second || o.RuntimeDownAfter > time.Hour:
		return o, optcheck.Range("nodestatus: Options.RuntimeDownAfter", o.RuntimeDownAfter, time.Second, time.Hour)
	}
	if o.KubeletVersion == "" {
		o.KubeletVersion = DefaultKubeletVersion
	}
	switch {
	case o.KubeletPort == 0:
		o.KubeletPort = DefaultKubeletPort
	case o.KubeletPort < 0 || o.KubeletPort > 65535:
		return o, optcheck.Range("nodestatus: Options.KubeletPort", o.KubeletPort, 1, 65535)
	}
	switch {
	case o.MaxImages == 0:
		o.MaxImages = DefaultMaxImages
	case o.MaxImages < -1:
		return o, optcheck.AtLeast("nodestatus", "MaxImages", o.MaxImages, -1)
	}
	switch {
	case o.MaxNamesPerImage == 0:
		o.MaxNamesPerImage = DefaultMaxNamesPerImage
	case o.MaxNamesPerImage < 0:
		return o, optcheck.AtLeast("nodestatus", "MaxNamesPerImage", o.MaxNamesPerImage, 1)
	}
	if o.EvictionHard == nil {
		o.EvictionHard = DefaultEvictionHard()
	}
	seen := map[string]bool{}
	for i, hc := range o.HealthChecks {
		if hc.Name == "" || hc.Check == nil {
			return o, fmt.Errorf("nodestatus: Options.HealthChecks[%d] needs a Name and a Check", i)
		}
		if seen[hc.Name] {
			return o, fmt.Errorf("nodestatus: Options.HealthChecks[%d]: name %q is used twice", i, hc.Name)
		}
		seen[hc.Name] = true
	}
	for _, list := range []struct {
		field string
		rl    corev1.ResourceList
	}{{"SystemReserved", o.SystemReserved}, {"KubeReserved", o.KubeReserved}} {
		for k, v := range list.rl {
			if v.Sign() < 0 {
				return o, optcheck.AtLeast("nodestatus", list.field+"["+string(k)+"]", v.String(), 0)
			}
		}
	}
	if err := validateNodeIPs(o.NodeIPs); err != nil {
		return o, err
	}
	for i, ip := range o.ExternalIPs {
		if ip.To16() == nil || ip.IsUnspecified() {
			return o, fmt.Errorf("nodestatus: Options.ExternalIPs[%d] %q is not a usable IP address", i, ip)
		}
	}
	return o, nil
}

func validateNodeIPs(ips []net.IP) error {
	if len(ips) > 2 {
		return fmt.Errorf("nodestatus: Options.NodeIPs may hold at most two addresses, not %d", len(ips))
	}
	for i, ip := range ips {
		var why string
		switch {
		case ip.To16() == nil:
			why = "not a valid IP address"
		case ip.IsUnspecified() && len(ips) > 1:
			why = "an unspecified address may only be given alone"
		case ip.IsLoopback():
			why = "a loopback address"
		case ip.IsMulticast():
			why = "a multicast address"
		case ip.IsLinkLocalUnicast():
			why = "a link-local address"
		}
		if why != "" {
			return fmt.Errorf("nodestatus: Options.NodeIPs[%d] %q is %s", i, ip, why)
		}
	}
	if len(ips) == 2 && (ips[0].To4() != nil) == (ips[1].To4() != nil) {
		return fmt.Errorf("nodestatus: Options.NodeIPs: two addresses must be one IPv4 and one IPv6, not %s and %s", ips[0], ips[1])
	}
	return nil
}

// sources are what the default setters of one list share: the host and the
// runtime, each asked at most once per pass (see once).
type sources struct {
	host         Host
	runtime      RuntimeInfo
	statusSource RuntimeStatusSource // nil: ask runtime
	recorder     record.EventRecorder
}

type (
	factsKey   struct{ s *sources }
	versionKey struct{ s *sources }
	statusKey  struct{ s *sources }
	imagesKey  struct{ s *sources }
)

func (s *sources) facts(ctx context.Context) (*HostFacts, error) {
	f, err := once(ctx, factsKey{s}, s.host.Facts)
	if err == nil && f == nil {
		err = errors.New("host returned no facts")
	}
	if err != nil {
		return nil, fmt.Errorf("reading host facts: %w", err)
	}
	return f, nil
}

func (s *sources) version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	v, err := once(ctx, versionKey{s}, s.runtime.Version)
	if err == nil && v == nil {
		err = errors.New("runtime returned no version")
	}
	return v, err
}

func (s *sources) status(ctx context.Context) (*runtimeapi.StatusResponse, error) {
	st, _, err := s.statusAt(ctx, time.Time{})
	return st, err
}

// statusAt returns the runtime's status and when it was observed: now for
// a status asked of the runtime in this pass, the observation's time for
// one from the RuntimeStatus source.
func (s *sources) statusAt(ctx context.Context, now time.Time) (*runtimeapi.StatusResponse, time.Time, error) {
	if s.statusSource != nil {
		st, at, err := s.statusSource.LatestRuntimeStatus()
		if err == nil && at.IsZero() {
			err = errRuntimeStatusNotObserved
		}
		if err == nil && (st == nil || st.Status == nil) {
			err = errors.New("runtime returned no status")
		}
		return st, at, err
	}
	st, err := once(ctx, statusKey{s}, func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return s.runtime.Status(ctx, false)
	})
	if err == nil && (st == nil || st.Status == nil) {
		err = errors.New("runtime returned no status")
	}
	return st, now, err
}

func (s *sources) images(ctx context.Context) ([]*runtimeapi.Image, error) {
	return once(ctx, imagesKey{s}, func(ctx context.Context) ([]*runtimeapi.Image, error) {
		return s.runtime.ListImages(ctx, nil)
	})
}

// event records a node event when a recorder is configured.
func (s *sources) event(node *corev1.Node, eventType, reason, messageFmt string, args ...any) {
	if s.recorder == nil {
		return
	}
	uid := node.UID
	if uid == "" {
		uid = types.UID(node.Name)
	}
	ref := &corev1.ObjectReference{Kind: "Node", Name: node.Name, UID: uid}
	s.recorder.Eventf(ref, eventType, reason, messageFmt, args...)
}
