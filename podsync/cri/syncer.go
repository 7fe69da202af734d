package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/internal/mountinfo"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/runtimeclass"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"

	"github.com/nodekit/nodekit/internal/loop"
)

// Options configure the CRI-backed PodSyncer. The zero value of each field
// means its default.
type Options struct {
	// Runtime runs the pods. Required.
	Runtime runtime.Runtime
	// RuntimeHandler is passed to RunPodSandbox for pods without a
	// runtimeClassName. Default "" (the runtime's default).
	RuntimeHandler string
	// RuntimeClasses resolves a pod's runtimeClassName to the handler its
	// sandbox runs with (podsync/runtimeclass's Manager; a pod half's
	// BackendParts.RuntimeClasses). Default nil: every RuntimeClass is not
	// found, so a pod naming one does not start.
	RuntimeClasses podsync.RuntimeClasses
	// UserNamespaces sets the ID ranges of pods with spec.hostUsers false.
	// Default: the kubelet's.
	UserNamespaces UserNamespaceOptions
	// Probes gives liveness and startup results to the planner. Default nil: none.
	Probes podsync.ProbeResults
	// Clock times back-offs and hooks. Default clock.RealClock{}.
	Clock clock.Clock
	// Recorder receives the kubelet's events (Pulling, Pulled, Created,
	// Started, Killing, BackOff, Failed, FailedCreatePodSandBox,
	// FailedPostStartHook, FailedPreStopHook). Default nil: none.
	Recorder record.EventRecorder
	// PodLogRoot holds the pods' log directories. Default "/var/log/pods".
	PodLogRoot string
	// PodRoot holds each pod's directory (<PodRoot>/<uid>: emptyDir volumes,
	// termination-message files). Default "/var/lib/nodekit/pods".
	PodRoot string
	// CgroupDriver is CgroupfsDriver or SystemdDriver. Default CgroupfsDriver.
	CgroupDriver string
	// CgroupRoot is the cgroupfs path kubepods lives under. Default "/".
	CgroupRoot string
	// CgroupsPerQOS (the kubelet's cgroupsPerQOS, on by default there)
	// makes the syncer keep the pod-level cgroups on the cgroupfs driver:
	// kubepods, kubepods/burstable and kubepods/besteffort (BestEffort with
	// the minimum CPU shares, Burstable with the sum of its pods' CPU
	// requests), and one pod<uid> cgroup per pod with the pod's CPU shares,
	// CPU quota and memory limit, created before its sandbox and removed
	// once its containers and sandboxes are gone. Needs root and a mounted
	// cgroup hierarchy (v1 or v2). With the systemd driver the runtime
	// creates the pod's slice and no pod-level limit is set. Default false:
	// the runtime creates the cgroup parent's directories as it needs them
	// and they stay.
	CgroupsPerQOS bool
	// ClusterDNS and ClusterDomain are the kubelet's flags of the same names.
	// Default none: ClusterFirst pods get the node's resolver.
	ClusterDNS    []string
	ClusterDomain string
	// ResolvConf is the node's resolver configuration file. Default
	// "/etc/resolv.conf"; "-" for none.
	ResolvConf string
	// NodeName answers spec.nodeName for pods that lack it.
	NodeName string
	// HostIPs are the node's addresses: status.hostIP(s), and pod IPs on the
	// host network.
	HostIPs []string
	// MemoryCapacity (bytes) sets Burstable containers' oom_score_adj.
	// Default 0: 999.
	MemoryCapacity int64
	// SeccompDefault gives containers without a seccomp profile the
	// runtime's default one (the kubelet's seccompDefault). Default false:
	// Unconfined.
	SeccompDefault bool
	// SeccompProfileRoot holds the Localhost seccomp profiles: a
	// localhostProfile is a path relative to it (the kubelet's
	// <root-dir>/seccomp). Default: "seccomp" beside PodRoot
	// (/var/lib/nodekit/seccomp).
	SeccompProfileRoot string
	// CrashLoopInitial and CrashLoopMax bound the crash-loop back-off.
	// Defaults 10s and 5m; Initial in [1ms, Max], Max in [Initial, 1h]. A key
	// is forgotten 2×Max after its last back-off (10m).
	CrashLoopInitial, CrashLoopMax time.Duration
	// MaxParallelImagePulls bounds the image pulls at once. Default 1: pulls
	// are serialized, as the kubelet's serializeImagePulls; between 1 and 1000.
	MaxParallelImagePulls int
	// ImagePullInitial and ImagePullMax bound the image pull back-off.
	// Defaults 10s and 5m.
	ImagePullInitial, ImagePullMax time.Duration
	// PodData sets up volumes other than emptyDir on disk and hostPath,
	// resolves env from the API, and gives image pull credentials;
	// podsync/volume's Manager is the kubelet's. Default nil: such volumes
	// and env are CreateContainerConfigError, pulls carry no credentials,
	// and a terminated pod's directory is removed as it is.
	PodData PodData
	// Registerer receives kubelet_runtime_operations_errors_total (shared,
	// idempotently, with the engine's metrics). Default nil: none.
	Registerer prometheus.Registerer
	// StatusPeriod is how often the runtime's status is asked while the
	// last answer said the runtime and its network are ready, as the
	// kubelet checks the runtime every 5s: a relist or health check within
	// it keeps that answer. While the runtime or its network is not ready,
	// or the last ask failed, every relist asks again. Default
	// DefaultStatusPeriod; between 10ms and 1m.
	StatusPeriod time.Duration
}

// DefaultStatusPeriod is Options.StatusPeriod's default, the kubelet's
// runtime status check period.
const DefaultStatusPeriod = 5 * time.Second

// ErrNetworkNotReady is SyncPod's error for a pod-network pod while the
// runtime reports NetworkReady false; the pod is retried after 1s.
var ErrNetworkNotReady = errors.New("network is not ready: container runtime network not ready")

// Syncer is the kubelet-exact PodSyncer and Relister on a runtime.Runtime.
type Syncer struct {
	rt           runtime.Runtime
	handler      string
	classes      podsync.RuntimeClasses
	userns       *usernsAllocator
	probes       podsync.ProbeResults
	clock        clock.Clock
	recorder     record.EventRecorder
	hooks        *probe.Handlers
	pulls        chan struct{}
	statusPeriod time.Duration
	b            builder
	metrics      *metrics
	cgroups      *podCgroups // nil: CgroupsPerQOS off or the systemd driver
	// started is when the syncer was made: a container created before it
	// was created by an earlier agent on this node.
	started time.Time

	mu        sync.Mutex
	crashLoop backoff.Map[string]
	pull      backoff.Map[string]
	pullErr   map[string]string // the last failed pull's message, by pull key
	name      string            // runtime name, for container IDs
	netReady  bool              // NetworkReady at the last relist
	status    observedStatus
	sandboxes map[string]*sandboxCache
	ctrs      map[string]*podsync.ContainerState
}

type sandboxCache struct {
	state runtimeapi.PodSandboxState
	s     *podsync.SandboxState
}

var (
	_ podsync.PodSyncer   = (*Syncer)(nil)
	_ podsync.PodRelister = (*Syncer)(nil)
)

// New returns the CRI-backed PodSyncer.
func New(o Options) (*Syncer, error) {
	if o.Runtime == nil {
		return nil, optcheck.Required("cri: Options.Runtime")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.CrashLoopInitial, 10*time.Second)
	def(&o.CrashLoopMax, 5*time.Minute)
	def(&o.ImagePullInitial, 10*time.Second)
	def(&o.ImagePullMax, 5*time.Minute)
	def(&o.StatusPeriod, DefaultStatusPeriod)
	if err := optcheck.Range("cri: Options.StatusPeriod", o.StatusPeriod, 10*time.Millisecond, time.Minute); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		what      string
		init, max time.Duration
	}{{"CrashLoop", o.CrashLoopInitial, o.CrashLoopMax}, {"ImagePull", o.ImagePullInitial, o.ImagePullMax}} {
		if err := optcheck.Range("cri: Options."+c.what+"Max", c.max, time.Millisecond, time.Hour); err != nil {
			return nil, err
		}
		if err := optcheck.Range("cri: Options."+c.what+"Initial", c.init, time.Millisecond, c.max); err != nil {
			return nil, err
		}
	}
	if o.MaxParallelImagePulls == 0 {
		o.MaxParallelImagePulls = 1
	}
	if err := optcheck.Range("cri: Options.MaxParallelImagePulls", o.MaxParallelImagePulls, 1, 1000); err != nil {
		return nil, err
	}
	if o.PodLogRoot == "" {
		o.PodLogRoot = "/var/log/pods"
	}
	if o.PodRoot == "" {
		o.PodRoot = "/var/lib/nodekit/pods"
	}
	if o.SeccompProfileRoot == "" {
		o.SeccompProfileRoot = filepath.Join(filepath.Dir(o.PodRoot), "seccomp")
	}
	switch o.CgroupDriver {
	case "":
		o.CgroupDriver = CgroupfsDriver
	case CgroupfsDriver, SystemdDriver:
	default:
		return nil, fmt.Errorf("cri: Options.CgroupDriver %q must be %q or %q", o.CgroupDriver, CgroupfsDriver, SystemdDriver)
	}
	var resolv []byte
	switch o.ResolvConf {
	case "-":
	case "":
		resolv, _ = os.ReadFile("/etc/resolv.conf")
	default:
		var err error
		if resolv, err = os.ReadFile(o.ResolvConf); err != nil {
			return nil, fmt.Errorf("cri: Options.ResolvConf: %w", err)
		}
	}
	hooks, err := probe.NewHandlers(probe.HandlerOptions{Execer: o.Runtime, Product: "kube-lifecycle"})
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("cri: Options.Registerer: %w", err)
	}
	if o.RuntimeClasses == nil {
		if o.RuntimeClasses, err = runtimeclass.New(runtimeclass.Options{}); err != nil {
			return nil, err
		}
	}
	userns, err := newUsernsAllocator(o.UserNamespaces, o.PodRoot)
	if err != nil {
		return nil, err
	}
	var cg *podCgroups
	if o.CgroupsPerQOS && o.CgroupDriver == CgroupfsDriver {
		if cg, err = newPodCgroups(o.CgroupRoot, mountinfo.Self); err != nil {
			return nil, err
		}
	}
	c := &Syncer{rt: o.Runtime, classes: o.RuntimeClasses, userns: userns, cgroups: cg, started: o.Clock.Now(), handler: o.RuntimeHandler, probes: o.Probes, clock: o.Clock, recorder: o.Recorder, hooks: hooks, metrics: m, pulls: make(chan struct{}, o.MaxParallelImagePulls), statusPeriod: o.StatusPeriod,
		b: builder{podLogRoot: o.PodLogRoot, podRoot: o.PodRoot, cgroupDriver: o.CgroupDriver, cgroupRoot: o.CgroupRoot,
			clusterDNS: o.ClusterDNS, clusterDomain: o.ClusterDomain, resolvConf: resolv, nodeName: o.NodeName,
			hostIPs: o.HostIPs, memoryCapacity: o.MemoryCapacity, seccompDefault: o.SeccompDefault, seccompRoot: o.SeccompProfileRoot, appArmor: admission.HostAppArmorEnabled(), data: o.PodData},
		crashLoop: backoff.Map[string]{Initial: o.CrashLoopInitial, Max: o.CrashLoopMax},
		pull:      backoff.Map[string]{Initial: o.ImagePullInitial, Max: o.ImagePullMax},
		sandboxes: map[string]*sandboxCache{}, ctrs: map[string]*podsync.ContainerState{}, netReady: true, pullErr: map[string]string{},
	}
	return c, nil
}

// RuntimeName is the runtime's name as Version reported it at the first
// relist ("containerd"), the prefix of container IDs in statuses.
func (c *Syncer) RuntimeName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.name
}

func (c *Syncer) event(pod *corev1.Pod, typ, reason, format string, args ...any) {
	if c.recorder != nil && pod != nil {
		c.recorder.Eventf(pod, typ, reason, format, args...)
	}
}

func (c *Syncer) opError(op string, err error) error {
	if err != nil {
		c.metrics.runtimeErrors.WithLabelValues(op).Inc()
	}
	return err
}

// Relist lists the runtime's sandboxes and containers that carry the
// kubelet's pod labels and returns them by pod UID. Anything without
// io.kubernetes.pod.uid is not a pod's and is left out. Sandbox and
// container statuses are fetched only for objects new or changed since the
// last relist. It asks the runtime's status too when that is due
// (Options.StatusPeriod).
func (c *Syncer) Relist(ctx context.Context) (map[types.UID]*podsync.PodState, error) {
	if c.RuntimeName() == "" {
		v, err := c.rt.Version(ctx)
		if err != nil {
			return nil, c.opError("version", err)
		}
		c.mu.Lock()
		c.name = v.RuntimeName
		c.mu.Unlock()
	}
	_ = c.refreshStatus(ctx) // recorded for LatestRuntimeStatus; the lists below fail too when the runtime is gone
	sbs, err := c.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, c.opError("list_podsandbox", err)
	}
	ctrs, err := c.rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, c.opError("list_containers", err)
	}
	return c.assemble(ctx, sbs, ctrs, true)
}

// RelistPod observes one pod: its sandboxes and containers, selected by
// their pod UID label. It returns nil when the runtime holds nothing of it.
func (c *Syncer) RelistPod(ctx context.Context, uid types.UID) (*podsync.PodState, error) {
	sel := map[string]string{LabelPodUID: string(uid)}
	sbs, err := c.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, c.opError("list_podsandbox", err)
	}
	ctrs, err := c.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, c.opError("list_containers", err)
	}
	pods, err := c.assemble(ctx, sbs, ctrs, false)
	if err != nil {
		return nil, err
	}
	return pods[uid], nil
}

// assemble groups sandboxes and containers by pod, reading a status only
// where the state changed since the last look; all says the lists are
// complete, so cached statuses of what is gone are dropped.
func (c *Syncer) assemble(ctx context.Context, sbs []*runtimeapi.PodSandbox, ctrs []*runtimeapi.Container, all bool) (map[types.UID]*podsync.PodState, error) {
	pods := make(map[types.UID]*podsync.PodState)
	pod := func(l map[string]string) *podsync.PodState {
		uid := types.UID(l[LabelPodUID])
		if uid == "" {
			return nil
		}
		p := pods[uid]
		if p == nil {
			p = &podsync.PodState{UID: uid, Name: l[LabelPodName], Namespace: l[LabelPodNamespace]}
			pods[uid] = p
		}
		return p
	}
	seenSB := make(map[string]bool, len(sbs))
	for _, sb := range sbs {
		p := pod(sb.Labels)
		if p == nil {
			continue
		}
		seenSB[sb.Id] = true
		s, err := c.sandboxState(ctx, sb)
		if err != nil {
			if runtime.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		p.Sandboxes = append(p.Sandboxes, s)
	}
	seenC := make(map[string]bool, len(ctrs))
	for _, ct := range ctrs {
		p := pod(ct.Labels)
		if p == nil || ct.Labels[LabelContainerName] == "" {
			continue
		}
		seenC[ct.Id] = true
		s, err := c.containerState(ctx, ct)
		if err != nil {
			if runtime.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		p.Containers = append(p.Containers, s)
	}
	if all {
		c.mu.Lock()
		for id := range c.sandboxes {
			if !seenSB[id] {
				delete(c.sandboxes, id)
			}
		}
		for id := range c.ctrs {
			if !seenC[id] {
				delete(c.ctrs, id)
			}
		}
		c.mu.Unlock()
	}
	for _, p := range pods {
		sort.SliceStable(p.Sandboxes, func(i, j int) bool {
			a, b := p.Sandboxes[i], p.Sandboxes[j]
			if a.Attempt != b.Attempt {
				return a.Attempt > b.Attempt
			}
			return a.CreatedAt.After(b.CreatedAt)
		})
		sort.SliceStable(p.Containers, func(i, j int) bool {
			a, b := p.Containers[i], p.Containers[j]
			if !a.CreatedAt.Equal(b.CreatedAt) {
				return a.CreatedAt.After(b.CreatedAt)
			}
			return a.RestartCount > b.RestartCount
		})
	}
	return pods, nil
}

func (c *Syncer) sandboxState(ctx context.Context, sb *runtimeapi.PodSandbox) (*podsync.SandboxState, error) {
	c.mu.Lock()
	cached := c.sandboxes[sb.Id]
	c.mu.Unlock()
	if cached != nil && cached.state == sb.State {
		return cached.s, nil
	}
	resp, err := c.rt.PodSandboxStatus(ctx, sb.Id, false)
	if err != nil {
		return nil, c.opError("podsandbox_status", err)
	}
	st := resp.GetStatus()
	s := &podsync.SandboxState{ID: sb.Id, State: sb.State, CreatedAt: time.Unix(0, sb.CreatedAt)}
	if md := sb.Metadata; md != nil {
		s.Attempt = md.Attempt
	}
	if ns := st.GetLinux().GetNamespaces().GetOptions(); ns != nil {
		s.HostNetwork = ns.Network == runtimeapi.NamespaceMode_NODE
	}
	if n := st.GetNetwork(); n != nil && n.Ip != "" {
		s.IPs = append(s.IPs, n.Ip)
		for _, ip := range n.AdditionalIps {
			s.IPs = append(s.IPs, ip.Ip)
		}
	}
	c.mu.Lock()
	c.sandboxes[sb.Id] = &sandboxCache{state: sb.State, s: s}
	c.mu.Unlock()
	return s, nil
}

func (c *Syncer) containerState(ctx context.Context, ct *runtimeapi.Container) (*podsync.ContainerState, error) {
	c.mu.Lock()
	cached := c.ctrs[ct.Id]
	c.mu.Unlock()
	if cached != nil && cached.State == ct.State {
		return cached, nil
	}
	resp, err := c.rt.ContainerStatus(ctx, ct.Id, false)
	if err != nil {
		return nil, c.opError("container_status", err)
	}
	st := resp.GetStatus()
	s := &podsync.ContainerState{ID: ct.Id, SandboxID: ct.PodSandboxId, Name: ct.Labels[LabelContainerName], State: st.GetState(),
		Image: st.GetImage().GetImage(), ImageRef: st.GetImageRef(), Hash: ct.Annotations[AnnotationContainerHash],
		CreatedAt: time.Unix(0, st.GetCreatedAt()), ExitCode: st.GetExitCode(), Reason: st.GetReason(), Message: st.GetMessage()}
	s.RestartCount, _ = strconv.Atoi(ct.Annotations[AnnotationContainerRestartCount])
	if s.Exited() && s.Message == "" && ct.Annotations[AnnotationContainerTerminationMessagePath] != "" {
		s.Message = c.terminationMessage(ct.Labels[LabelPodUID], s.Name, s.RestartCount)
	}
	if s.Exited() && s.Message == "" && s.ExitCode != 0 &&
		ct.Annotations[AnnotationContainerTerminationMessagePolicy] == string(corev1.TerminationMessageFallbackToLogsOnError) {
		s.Message = logTail(st.GetLogPath())
	}
	if t := st.GetStartedAt(); t > 0 {
		s.StartedAt = time.Unix(0, t)
	}
	if t := st.GetFinishedAt(); t > 0 {
		s.FinishedAt = time.Unix(0, t)
	}
	s.CutShort = c.cutShort(st)
	if u := st.GetUser().GetLinux(); u != nil {
		s.User = &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: u.GetUid(), GID: u.GetGid(), SupplementalGroups: u.GetSupplementalGroups()}}
	}
	c.mu.Lock()
	c.ctrs[ct.Id] = s
	c.mu.Unlock()
	return s, nil
}

// maxTerminationMessage is the kubelet's limit on a termination message.
const maxTerminationMessage = 4096

// terminationMessage reads what an exited container wrote to its
// termination-message file (the file its terminationMessagePath mounts).
func (c *Syncer) terminationMessage(uid, name string, restartCount int) string {
	f, err := os.Open(c.b.terminationMessageFile(types.UID(uid), name, restartCount))
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxTerminationMessage)
	n, _ := io.ReadFull(f, buf)
	return string(buf[:n])
}

// Limits of a termination message taken from the log, as the kubelet's.
const (
	logTailLines = 80
	logTailBytes = 2048
)

// logTail returns the last lines of a container log in the CRI format
// ("<time> <stream> <P|F> <text>"), at most 80 lines and 2 KiB.
func logTail(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	data, _ := io.ReadAll(io.LimitReader(f, window))
	var lines []string
	var partial strings.Builder
	for _, l := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(l, " ", 4)
		if len(parts) < 4 {
			continue
		}
		partial.WriteString(parts[3])
		if parts[2] == "F" {
			lines = append(lines, partial.String())
			partial.Reset()
		}
	}
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	out := strings.Join(lines, "\n")
	if len(lines) > 0 {
		out += "\n"
	}
	if len(out) > logTailBytes {
		out = out[len(out)-logTailBytes:]
	}
	return out
}

// crashLoopWait is the planner's view of the crash-loop back-off.
func (c *Syncer) crashLoopWait(key string, finishedAt time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashLoop.Wait(key, finishedAt)
}

// SyncPod plans with ComputePodActions and carries the actions out.
func (c *Syncer) SyncPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState) (podsync.SyncResult, error) {
	if err := c.b.setUpPod(ctx, pod); err != nil {
		return podsync.SyncResult{}, err
	}
	now := c.clock.Now()
	a := podsync.ComputePodActions(podsync.PlanInput{Pod: pod, State: observed, Probes: c.probes, Now: now, CrashLoopWait: c.crashLoopWait})
	res := a.BackOffResult(now)
	for _, b := range a.BackOff {
		c.event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", b.Name, pod.Name, pod.Namespace, pod.UID)
	}
	if a.Empty() {
		return res, nil
	}
	c.mu.Lock()
	netReady := c.netReady
	c.mu.Unlock()
	if !netReady && !pod.Spec.HostNetwork {
		// As the kubelet: pod-network pods wait for the network, retried each second.
		res.RequeueWithin(time.Second)
		return res, ErrNetworkNotReady
	}
	res.Changed = true
	if a.KillPod {
		if err := c.killPod(ctx, pod, observed, 0); err != nil {
			return res, err
		}
		if !a.CreateSandbox {
			return res, nil
		}
	}
	if c.cgroups != nil {
		if err := c.cgroups.Ensure(pod); err != nil {
			c.event(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod cgroup: %v", err)
			return res, err
		}
	}
	sandboxID := a.SandboxID
	sbConfig := c.b.sandboxConfig(pod, a.Attempt)
	handler, userns, rtErr := c.podRuntime(ctx, pod)
	sbConfig.Linux.SecurityContext.NamespaceOptions.UsernsOptions = userns
	if a.CreateSandbox {
		if rtErr != nil {
			// As the kubelet: the sandbox config cannot be made (a missing
			// RuntimeClass, a user namespace the handler cannot run).
			c.event(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", rtErr)
			return res, rtErr
		}
		if err := os.MkdirAll(sbConfig.LogDirectory, 0o755); err != nil {
			return res, err
		}
		id, err := c.rt.RunPodSandbox(ctx, sbConfig, handler)
		if err != nil {
			c.event(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", grpcError(err))
			return res, c.opError("run_podsandbox", err)
		}
		sandboxID = id
		// Init containers of the old sandbox must not count as done.
		if observed != nil {
			for _, ct := range observed.Containers {
				if isInitName(pod, ct.Name) {
					_ = c.rt.RemoveContainer(ctx, ct.ID)
				}
			}
		}
	}
	ips := podIPs{host: c.b.hostIPs}
	if pod.Spec.HostNetwork {
		ips.pod = c.b.hostIPs
	} else if st, err := c.rt.PodSandboxStatus(ctx, sandboxID, false); err == nil && st.GetStatus().GetNetwork().GetIp() != "" {
		ips.pod = []string{st.Status.Network.Ip}
	}
	for _, k := range a.Kill {
		spec := podsync.ContainerSpec(pod, k.Name)
		grace := containerGrace(pod, spec, k.Probe)
		var ct *podsync.ContainerState
		if observed != nil {
			for _, o := range observed.Containers {
				if o.ID == k.ID {
					ct = o
				}
			}
		}
		if err := c.killContainer(ctx, pod, spec, ct, k.ID, grace, ips); err != nil {
			return res, err
		}
	}
	var firstErr error
	for _, ref := range a.Start {
		spec := ref.Spec(pod)
		target := ""
		if ref.Ephemeral {
			if t := pod.Spec.EphemeralContainers[ref.Index].TargetContainerName; t != "" {
				if tc := observed.Latest(t); tc != nil && tc.Running() {
					target = tc.ID
				}
			}
		}
		reason, msg, err := "", "", rtErr
		if err != nil {
			// The kubelet makes each container's config with the pod's
			// namespaces, and fails it as this.
			c.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
			reason, msg = podsync.ReasonCreateContainerConfigError, err.Error()
		} else {
			reason, msg, err = c.startContainer(ctx, pod, spec, observed, sandboxID, sbConfig, ips, target)
		}
		if err != nil {
			res.SetWaiting(spec.Name, reason, msg)
			if firstErr == nil {
				firstErr = err
			}
			res.RequeueWithin(c.pullBackOffLeft(pod, spec))
		}
	}
	c.gc(ctx, observed, a.CreateSandbox)
	return res, firstErr
}

func isInitName(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name && !podsync.IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// containerGrace is the kubelet's grace for killing one container outside
// a pod kill: deletionGracePeriodSeconds, else the failed probe's
// terminationGracePeriodSeconds, else the pod's, else 2s.
func containerGrace(pod *corev1.Pod, spec *corev1.Container, pr *corev1.Probe) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pr != nil && pr.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pr.TerminationGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return minGrace
}

const minGrace = 2 * time.Second

// startContainer pulls the image as the policy says, creates and starts the
// container, and runs its postStart hook. On failure it returns the waiting
// reason and message.
// An ephemeral container with a running target (targetID) shares the
// target's process namespace.
func (c *Syncer) startContainer(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, observed *podsync.PodState, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, ips podIPs, targetID string) (string, string, error) {
	now := c.clock.Now()
	prev := observed.Latest(spec.Name)
	// A container created for this spec that never started is the start
	// an agent that stopped (or was killed) cut short, not a restart of
	// the container: created, it is started as it is; exited (the runtime
	// aborted the start when that agent's call went away), it is replaced
	// at the same restart count, once, if an earlier agent created it.
	// Either way no second container of the name is left.
	unstarted := prev != nil && prev.StartedAt.IsZero() && prev.Hash == podsync.HashContainer(spec) && targetID == ""
	cutShort := unstarted && prev.CutShort
	if unstarted && prev.State == runtimeapi.ContainerState_CONTAINER_CREATED && prev.SandboxID == sandboxID {
		reason, msg, err := c.runContainer(ctx, pod, spec, prev.ID, ips)
		if !errors.Is(err, errCutShort) {
			return reason, msg, err
		}
		// The runtime aborted that agent's start after this sync saw the
		// container created.
		cutShort = true
	}
	restartCount := 0
	switch {
	case cutShort:
		// Its name (with the attempt) is the replacement's: remove it first.
		err := c.rt.RemoveContainer(ctx, prev.ID)
		switch {
		case err == nil:
			restartCount = prev.RestartCount
		case runtime.Code(err) == codes.FailedPrecondition:
			// The runtime keeps it, and no CRI call changes that:
			// containerd 2, when the start was cut short after the
			// container's task was created and before its pid was read,
			// keeps the task, reports the container exited, and refuses
			// to remove it while the task exists. Its name stays taken,
			// so the replacement is a restart, as the kubelet starts it.
			c.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
			klog.FromContext(ctx).Info("The runtime keeps a container whose start was cut short; starting its replacement as a restart",
				"container", spec.Name, "containerID", prev.ID, "err", c.opError("remove_container", err))
			restartCount = prev.RestartCount + 1
		default:
			return podsync.ReasonCreateContainerError, err.Error(), c.opError("remove_container", err)
		}
	case prev != nil:
		restartCount = prev.RestartCount + 1
	default:
		restartCount = nextLogIndex(filepath.Join(sbConfig.LogDirectory, spec.Name))
	}
	if observed.NewestExited(spec.Name) != nil && !cutShort {
		// A restart after an exit, or of a container killed to be
		// replaced that had exited before: the back-off grows, as the
		// kubelet's does whenever the container has an exit on record.
		c.mu.Lock()
		c.crashLoop.Next(podsync.CrashLoopKey(pod, spec), now)
		c.mu.Unlock()
	}
	if reason, msg, err := c.ensureImage(ctx, pod, spec, sbConfig); err != nil {
		return reason, msg, err
	}
	cfg, err := c.b.containerConfig(pod, spec, restartCount, ips)
	if err == nil {
		err = c.verifyRunAsNonRoot(ctx, pod, spec)
	}
	if err != nil {
		c.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return podsync.ReasonCreateContainerConfigError, err.Error(), err
	}
	if targetID != "" && cfg.Linux != nil && cfg.Linux.SecurityContext != nil && cfg.Linux.SecurityContext.NamespaceOptions != nil {
		cfg.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
		cfg.Linux.SecurityContext.NamespaceOptions.TargetId = targetID
	}
	setUserns(cfg, sbConfig.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions())
	id, err := c.rt.CreateContainer(ctx, sandboxID, cfg, sbConfig)
	if err != nil {
		msg := runtimeMessage(err)
		c.event(pod, corev1.EventTypeWarning, "Failed", "Error: %s", msg)
		return podsync.ReasonCreateContainerError, msg, c.opError("create_container", err)
	}
	c.event(pod, corev1.EventTypeNormal, "Created", "Created container %s", spec.Name)
	return c.runContainer(ctx, pod, spec, id, ips)
}

// runContainer starts the created container id and runs its postStart
// hook. On failure it returns the waiting reason and message.
func (c *Syncer) runContainer(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, id string, ips podIPs) (string, string, error) {
	if err := c.rt.StartContainer(ctx, id); err != nil {
		// Started already: by a sync that saw it created before its start
		// was observed (container events can lag), or by the call of an
		// agent before this one. Not a failure to report: the container
		// runs, and saying it waits would take the pod back to Pending.
		st, serr := c.rt.ContainerStatus(ctx, id, false)
		if serr == nil && st.GetStatus().GetStartedAt() != 0 {
			return "", "", nil
		}
		if serr == nil && c.cutShort(st.GetStatus()) {
			return "", "", errCutShort
		}
		if serr == nil && c.startMayBeInFlight(st.GetStatus()) {
			// The runtime refuses a start while another is in flight:
			// that of an agent that went away, which the runtime
			// completes or aborts (then the container is cut short).
			// Either way a relist sees the outcome and wakes the pod.
			klog.FromContext(ctx).V(2).Info("Start of an earlier agent may be in flight", "containerID", id, "err", err)
			return "", "", nil
		}
		msg := runtimeMessage(err)
		c.event(pod, corev1.EventTypeWarning, "Failed", "Error: %s", msg)
		return podsync.ReasonRunContainerError, msg, c.opError("start_container", err)
	}
	c.event(pod, corev1.EventTypeNormal, "Started", "Started container %s", spec.Name)
	if spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil {
		if msg, ok := c.runHook(ctx, pod, spec, id, spec.Lifecycle.PostStart, ips, containerGrace(pod, spec, nil)); !ok {
			c.event(pod, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %s", msg)
			_ = c.killContainer(ctx, pod, spec, nil, id, containerGrace(pod, spec, nil), ips)
			return podsync.ReasonPostStartHookError, msg, fmt.Errorf("postStart hook of %s: %s", spec.Name, msg)
		}
	}
	return "", "", nil
}

// errCutShort: the container to start is an earlier agent's cut short
// (ContainerState.CutShort); it is to be replaced.
var errCutShort = errors.New("podsync: the container's start was cut short by an earlier agent")

// cutShort reports whether a container's status is that of a start cut
// short before this syncer started (ContainerState.CutShort).
func (c *Syncer) cutShort(st *runtimeapi.ContainerStatus) bool {
	return st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED && st.GetStartedAt() == 0 &&
		time.Unix(0, st.GetCreatedAt()).Before(c.started)
}

// startInFlightFor is how long after a CRI syncer started a failed start
// of an earlier agent's created container is put down to that agent's
// start being still in flight.
const startInFlightFor = time.Minute

// startMayBeInFlight: the container is still created, an earlier agent
// created it, and this syncer started less than startInFlightFor ago.
func (c *Syncer) startMayBeInFlight(st *runtimeapi.ContainerStatus) bool {
	return st.GetState() == runtimeapi.ContainerState_CONTAINER_CREATED && time.Unix(0, st.GetCreatedAt()).Before(c.started) &&
		c.clock.Since(c.started) < startInFlightFor
}

// nextLogIndex is 1 + the highest N of N.log in dir, 0 if none: the
// restart count of a container whose earlier instances are gone.
func nextLogIndex(dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	next := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") && n+1 > next {
			next = n + 1
		}
	}
	return next
}

func (c *Syncer) pullKey(pod *corev1.Pod, spec *corev1.Container) string {
	return string(pod.UID) + "_" + spec.Image
}

func (c *Syncer) pullBackOffLeft(pod *corev1.Pod, spec *corev1.Container) time.Duration {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.pull.Until(c.pullKey(pod, spec), now); ok {
		return until.Sub(now)
	}
	return 0
}

// ensureImage applies imagePullPolicy with the image pull back-off.
func (c *Syncer) ensureImage(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, sbConfig *runtimeapi.PodSandboxConfig) (string, string, error) {
	if spec.Image == "" {
		return podsync.ReasonInvalidImageName, "image is empty", errors.New("empty image")
	}
	img := &runtimeapi.ImageSpec{Image: spec.Image}
	policy := spec.ImagePullPolicy
	if policy == "" {
		policy = corev1.PullIfNotPresent
	}
	if policy != corev1.PullAlways {
		st, err := c.rt.ImageStatus(ctx, img, false)
		if err != nil {
			return podsync.ReasonErrImagePull, err.Error(), c.opError("image_status", err)
		}
		if st.GetImage() != nil {
			// The kubelet's words for an image it did not pull itself
			// (no credentials to verify).
			c.event(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine and can be accessed by the pod", spec.Image)
			return "", "", nil
		}
		if policy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", spec.Image)
			c.event(pod, corev1.EventTypeWarning, "ErrImageNeverPull", "%s", msg)
			return podsync.ReasonErrImageNeverPull, msg, errors.New(msg)
		}
	}
	key := c.pullKey(pod, spec)
	now := c.clock.Now()
	c.mu.Lock()
	_, backingOff := c.pull.Until(key, now)
	c.mu.Unlock()
	if backingOff {
		msg := fmt.Sprintf("Back-off pulling image %q", spec.Image)
		c.event(pod, corev1.EventTypeNormal, "BackOff", "%s", msg)
		c.mu.Lock()
		last, ok := c.pullErr[key]
		c.mu.Unlock()
		if ok {
			// The waiting message says why the last pull failed, as the
			// kubelet's does.
			msg += ": " + last
		}
		return podsync.ReasonImagePullBackOff, msg, errors.New(msg)
	}
	c.mu.Lock()
	delete(c.pullErr, key)
	c.mu.Unlock()
	select {
	case c.pulls <- struct{}{}:
	case <-ctx.Done():
		return podsync.ReasonErrImagePull, ctx.Err().Error(), ctx.Err()
	}
	c.event(pod, corev1.EventTypeNormal, "Pulling", "Pulling image %q", spec.Image)
	start := c.clock.Now()
	// As the kubelet: each credential in turn until one pulls, or the
	// pull without one when there are none.
	auths := c.b.pullAuth(pod, spec.Image)
	if len(auths) == 0 {
		auths = []*runtimeapi.AuthConfig{nil}
	}
	var err error
	for _, auth := range auths {
		if _, err = c.rt.PullImage(ctx, img, auth, sbConfig); err == nil || ctx.Err() != nil {
			break
		}
	}
	<-c.pulls
	if err != nil {
		msg := runtimeMessage(err)
		c.mu.Lock()
		c.pull.Next(key, c.clock.Now())
		c.pullErr[key] = podsync.ReasonErrImagePull + ": " + msg
		c.mu.Unlock()
		c.event(pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", spec.Image, msg)
		return podsync.ReasonErrImagePull, msg, c.opError("pull_image", err)
	}
	c.mu.Lock()
	c.pull.Forget(key)
	c.mu.Unlock()
	c.event(pod, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v", spec.Image, c.clock.Since(start))
	return "", "", nil
}

// runtimeMessage is what the runtime said about a failed call (its gRPC
// status message), as the kubelet reports it in waiting messages and
// events, without the endpoint, method and code runtime.Error adds.
func runtimeMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// runHook runs a lifecycle handler (exec or httpGet) and reports its
// message and whether it succeeded.
func (c *Syncer) runHook(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, id string, h *corev1.LifecycleHandler, ips podIPs, timeout time.Duration) (string, bool) {
	target := probe.Target{Pod: pod, Container: spec, ContainerID: id}
	if len(ips.pod) > 0 {
		target.PodIP = ips.pod[0]
	}
	var out probe.Outcome
	switch {
	case h.Exec != nil:
		out = c.hooks.Exec(ctx, h.Exec, target, timeout)
	case h.HTTPGet != nil:
		out = c.hooks.HTTPGet(ctx, h.HTTPGet, target, timeout)
		if out.Err == nil && out.StatusCode != 0 {
			// As the kubelet: a lifecycle hook's HTTP GET succeeds once any
			// response arrives, whatever its status.
			return out.Message, true
		}
		if out.Err == nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %s", h.HTTPGet.Path, spec.Name, pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", out.Message), false
		}
	case h.Sleep != nil:
		loop.Sleep(ctx, c.clock, time.Duration(h.Sleep.Seconds)*time.Second)
		return "", true
	default:
		// As the kubelet: a hook it cannot run (tcpSocket) fails.
		return fmt.Sprintf("Cannot run handler: invalid handler: %v", h), false
	}
	if out.Err != nil {
		return out.Err.Error(), false
	}
	return out.Message, out.Result == probe.Success
}

// killContainer runs the preStop hook (its time taken off grace) and stops
// the container with what is left, at least 2s.
func (c *Syncer) killContainer(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, ct *podsync.ContainerState, id string, grace time.Duration, ips podIPs) error {
	name := id
	if spec != nil {
		name = spec.Name
		c.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", spec.Name)
	}
	running := ct == nil || ct.Running()
	if spec != nil && running && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
		start := c.clock.Now()
		hctx, cancel := context.WithTimeout(ctx, grace)
		if msg, ok := c.runHook(hctx, pod, spec, id, spec.Lifecycle.PreStop, ips, grace); !ok {
			c.event(pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %s", msg)
			klog.FromContext(ctx).V(2).Info("preStop hook failed", "container", name, "message", msg)
		}
		cancel()
		grace -= c.clock.Since(start)
	}
	if err := c.rt.StopContainer(ctx, id, max(grace, minGrace)); err != nil && !runtime.IsNotFound(err) {
		return c.opError("stop_container", fmt.Errorf("stopping container %s: %w", name, err))
	}
	return nil
}

// podIPsOf returns the pod's addresses as the last relist saw them: the
// node's on the host network, else the newest sandbox's.
func (c *Syncer) podIPsOf(pod *corev1.Pod, observed *podsync.PodState) podIPs {
	ips := podIPs{host: c.b.hostIPs}
	if pod.Spec.HostNetwork {
		ips.pod = c.b.hostIPs
	} else if sb := observed.NewestSandbox(); sb != nil {
		ips.pod = sb.IPs
	}
	return ips
}

// killPod stops every live container within grace (0: each container's
// own), as the kubelet orders it: regular containers in parallel first, then
// init containers and sidecars one at a time in reverse order of the spec,
// each with what is left of grace (at least 2s); then every sandbox.
func (c *Syncer) killPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState, grace time.Duration) error {
	if observed == nil {
		return nil
	}
	initIdx := make(map[string]int, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		initIdx[pod.Spec.InitContainers[i].Name] = i
	}
	waves := make([][]*podsync.ContainerState, 1+len(pod.Spec.InitContainers))
	for _, ct := range observed.Containers {
		if ct.Exited() {
			continue
		}
		w := 0
		if i, ok := initIdx[ct.Name]; ok {
			w = len(pod.Spec.InitContainers) - i // the last init container stops first
		}
		waves[w] = append(waves[w], ct)
	}
	deadline := c.clock.Now().Add(grace)
	ips := c.podIPsOf(pod, observed)
	var errs []error
	for _, wave := range waves {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, ct := range wave {
			spec := podsync.ContainerSpec(pod, ct.Name)
			g := containerGrace(pod, spec, nil)
			if grace > 0 {
				g = max(deadline.Sub(c.clock.Now()), minGrace)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.killContainer(ctx, pod, spec, ct, ct.ID, g, ips); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, sb := range observed.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := c.rt.StopPodSandbox(ctx, sb.ID); err != nil {
				return c.opError("stop_podsandbox", err)
			}
		}
	}
	return nil
}

// CleanupPod removes the pod's log directory under PodLogRoot: the engine
// calls it once no source has the pod any more, as the kubelet's garbage
// collection removes a deleted pod's logs. A directory name that would not be
// a child of PodLogRoot is refused.
func (c *Syncer) CleanupPod(_ context.Context, pod *corev1.Pod) error {
	if pod.UID == "" {
		return nil
	}
	dir := podsync.PodLogDir(c.b.podLogRoot, pod)
	if filepath.Dir(dir) != filepath.Clean(c.b.podLogRoot) || strings.ContainsRune(filepath.Base(dir), filepath.Separator) {
		return fmt.Errorf("pod %s/%s: log directory %q is not below %q", pod.Namespace, pod.Name, dir, c.b.podLogRoot)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the log directory of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if _, err := os.Stat(c.b.podDir(pod)); errors.Is(err, os.ErrNotExist) {
		c.userns.release(pod.UID) // its directory, and the mapping file, are gone
	}
	return nil
}

var _ podsync.PodCleaner = (*Syncer)(nil)

// PodVolumeDirs returns the pod's volumes kept on the node's disk, by
// volume name: the directories <PodRoot>/<uid>/volumes/<plugin>/<name>
// that are not in memory (tmpfs: memory-backed emptyDirs, and what PodData
// keeps in memory). nodestatus/usage measures them as the pod's volumes
// (usage.Options.PodVolumeDirs), for the eviction manager's emptyDir
// sizeLimit and ephemeral-storage limits.
func (c *Syncer) PodVolumeDirs(uid string) map[string]string {
	if uid == "" || strings.ContainsAny(uid, `/\`) || uid == "." || uid == ".." {
		return nil
	}
	base := filepath.Join(c.b.podRoot, uid, "volumes")
	plugins, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, pl := range plugins {
		if !pl.IsDir() {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(base, pl.Name()))
		if err != nil {
			continue
		}
		for _, v := range vols {
			dir := filepath.Join(base, pl.Name(), v.Name())
			var st unix.Statfs_t
			if !v.IsDir() || unix.Statfs(dir, &st) != nil || st.Type == unix.TMPFS_MAGIC {
				continue
			}
			out[v.Name()] = dir
		}
	}
	return out
}

// gc removes exited containers but the newest exited one of each name (the
// last state of its successor), as the kubelet's container GC keeps one dead
// container per container, and sandboxes that are not ready, not the newest,
// and hold no container. With replaced (a new sandbox was just created), no
// observed sandbox is the newest any more: a not-ready one (say, one caught
// half-made by an agent that was killed) goes at once, not a resync later.
func (c *Syncer) gc(ctx context.Context, observed *podsync.PodState, replaced bool) (removed int) {
	if observed == nil {
		return 0
	}
	count := map[string]int{}
	seen := map[string]bool{}
	used := map[string]bool{}
	for _, ct := range observed.Containers {
		newest := !seen[ct.Name]
		seen[ct.Name] = true
		if ct.Exited() {
			count[ct.Name]++
		}
		stale := ct.State == runtimeapi.ContainerState_CONTAINER_CREATED && !newest // created, never started, superseded
		if stale || (count[ct.Name] > 1 && ct.Exited()) {
			if c.rt.RemoveContainer(ctx, ct.ID) == nil {
				removed++
			}
			continue
		}
		used[ct.SandboxID] = true
	}
	for i, sb := range observed.Sandboxes {
		if (i > 0 || replaced) && !sb.Ready() && !used[sb.ID] {
			if c.rt.RemovePodSandbox(ctx, sb.ID) == nil {
				removed++
			}
		}
	}
	return removed
}

// RemoveDeadContainers collects every pod in the runtime at once, as a
// sync collects its own pod: exited containers but the newest of each
// name, created containers a newer one superseded, and sandboxes that are
// not ready, not the newest and hold no container. It returns how many it
// removed. It is the eviction manager's dead-container reclaimer under
// disk pressure (kubelet's DeleteAllUnusedContainers); a pod's containers
// go with it when it ends, so what it finds is what pods left since their
// last sync, or an agent before this one.
func (c *Syncer) RemoveDeadContainers(ctx context.Context) (int, error) {
	sbs, err := c.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, c.opError("list_podsandbox", err)
	}
	ctrs, err := c.rt.ListContainers(ctx, nil)
	if err != nil {
		return 0, c.opError("list_containers", err)
	}
	pods, err := c.assemble(ctx, sbs, ctrs, false)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, st := range pods {
		removed += c.gc(ctx, st, false)
	}
	return removed, nil
}

// SyncTerminatingPod stops the pod's containers within gracePeriod and its
// sandboxes.
func (c *Syncer) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState, gracePeriod time.Duration) error {
	return c.killPod(ctx, pod, observed, gracePeriod)
}

// SyncTerminatedPod removes the pod's containers and sandboxes from the
// runtime, its directory under PodRoot and, with CgroupsPerQOS, its pod
// cgroup. Its logs stay until CleanupPod.
func (c *Syncer) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState) error {
	if observed != nil {
		// Removing a sandbox removes its containers (the CRI's contract);
		// containers of sandboxes already gone are removed one by one.
		sandboxes := make(map[string]bool, len(observed.Sandboxes))
		for _, sb := range observed.Sandboxes {
			if err := c.rt.RemovePodSandbox(ctx, sb.ID); err != nil {
				return c.opError("remove_podsandbox", err)
			}
			sandboxes[sb.ID] = true
		}
		for _, ct := range observed.Containers {
			if sandboxes[ct.SandboxID] {
				continue
			}
			if err := c.rt.RemoveContainer(ctx, ct.ID); err != nil && !runtime.IsNotFound(err) {
				return c.opError("remove_container", err)
			}
		}
	}
	if pod != nil && pod.UID != "" {
		if err := c.b.removePodDir(ctx, pod); err != nil {
			return err
		}
		c.userns.release(pod.UID)
		if c.cgroups != nil {
			if err := c.cgroups.Remove(pod.UID); err != nil {
				return err
			}
		}
	}
	c.mu.Lock()
	if pod != nil {
		for i := range pod.Spec.Containers {
			c.crashLoop.Forget(podsync.CrashLoopKey(pod, &pod.Spec.Containers[i]))
		}
		for i := range pod.Spec.InitContainers {
			c.crashLoop.Forget(podsync.CrashLoopKey(pod, &pod.Spec.InitContainers[i]))
		}
	}
	c.crashLoop.GC(c.clock.Now())
	c.pull.GC(c.clock.Now())
	for key := range c.pullErr {
		if _, backingOff := c.pull.Until(key, c.clock.Now()); !backingOff {
			delete(c.pullErr, key)
		}
	}
	c.mu.Unlock()
	return nil
}

// podRuntime is what the kubelet resolves before it makes a pod's sandbox
// and container configs: the runtime handler (the pod's RuntimeClass's,
// else Options.RuntimeHandler) and the user namespace.
func (c *Syncer) podRuntime(ctx context.Context, pod *corev1.Pod) (string, *runtimeapi.UserNamespace, error) {
	handler := c.handler
	if name := pod.Spec.RuntimeClassName; name != nil && *name != "" {
		h, err := c.classes.LookupRuntimeHandler(ctx, name)
		if err != nil {
			return "", nil, err
		}
		handler = h
	}
	userns, err := c.userns.namespace(pod, handler, func(h string) (bool, error) { return c.handlerSupportsUserns(ctx, h) })
	if err != nil {
		return "", nil, err
	}
	return handler, userns, nil
}

// handlerSupportsUserns is the kubelet's check of the runtime's handlers
// (its Status's, as the last relist saw them): false without an error
// when the runtime reports no handlers (containerd 1.6), an error for a
// handler it does not report.
func (c *Syncer) handlerSupportsUserns(ctx context.Context, handler string) (bool, error) {
	c.mu.Lock()
	st := c.status.status
	c.mu.Unlock()
	if st == nil {
		var err error
		if st, err = c.rt.Status(ctx, false); err != nil {
			return false, err
		}
	}
	hs := st.GetRuntimeHandlers()
	if len(hs) == 0 {
		return false, nil
	}
	for _, h := range hs {
		if h.GetName() == handler {
			return h.GetFeatures().GetUserNamespaces(), nil
		}
	}
	return false, fmt.Errorf("the handler %q is not known", handler)
}

// setUserns gives a container config the pod's user namespace and, in a
// namespace of its own, its mounts the pod's ID mappings (the runtime
// makes them ID-mapped mounts), as the kubelet does.
func setUserns(cfg *runtimeapi.ContainerConfig, userns *runtimeapi.UserNamespace) {
	if userns == nil || cfg.GetLinux().GetSecurityContext().GetNamespaceOptions() == nil {
		return
	}
	cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = userns
	for _, m := range cfg.Mounts {
		m.UidMappings, m.GidMappings = userns.Uids, userns.Gids
	}
}

// grpcError is a runtime call's error as the kubelet's CRI client returns
// it, the gRPC status ("rpc error: code = Unknown desc = ..."), for the
// events whose text the kubelet takes from it; other errors as they are.
func grpcError(err error) error {
	var re *runtime.Error
	if errors.As(err, &re) {
		if _, ok := status.FromError(re.Err); ok {
			return re.Err
		}
	}
	return err
}
