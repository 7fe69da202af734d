package podsource

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
)

// Mirror pod timing defaults and bounds.
const (
	// DefaultMirrorPeriod is how often MirrorPods.Run syncs without a trigger.
	DefaultMirrorPeriod = 10 * time.Second
)

// MirrorPodClient is the part of a client of core/v1 Pods in one namespace
// that MirrorPods uses (list, create, get, delete), with client-go's
// signatures: clientset.CoreV1().Pods(namespace) is one.
type MirrorPodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// NodeClient is the part of a client of core/v1 Nodes that MirrorPods uses
// to read the Node's UID: clientset.CoreV1().Nodes() is one.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
}

// MirrorPodsOptions configures MirrorPods.
type MirrorPodsOptions struct {
	// Pods returns the client of the pods of a namespace, "" for all of
	// them (a LIST of the node's pods without NodePods):
	// func(ns string) podsource.MirrorPodClient { return clientset.CoreV1().Pods(ns) }.
	// A node identity (system:node:<name>, under the Node authorizer and
	// NodeRestriction) suffices. Required.
	Pods func(namespace string) MirrorPodClient
	// Nodes reads the Node's UID: clientset.CoreV1().Nodes(). Required
	// unless NodeUID is set.
	Nodes NodeClient
	// NodeName is this node's name. Required.
	NodeName string
	// NodeUID returns the Node's UID for the owner reference NodeRestriction
	// requires. Default: GET the Node with Nodes, remembered once found
	// (forgotten when the API server reports a UID mismatch).
	NodeUID func(ctx context.Context) (types.UID, error)
	// StaticPods returns the current static pods; SyncOnce calls it once per
	// sync (Merger.StaticPods fits). Required.
	StaticPods func() []*v1.Pod
	// NodePods returns the pods bound to the node as a watch of them shows
	// them, and whether that view is complete yet; SyncOnce then reads
	// mirror pods from it instead of LISTing the node's pods, as kubelet
	// reads them from its pod manager. For Merger-fed agents:
	// func() ([]*v1.Pod, bool) { return merger.Pods(APISource), merger.SeenAllSources() }.
	// Default nil: one LIST per sync.
	NodePods func() ([]*v1.Pod, bool)
	// SourcesReady reports whether every source of static pods has reported
	// its pods once. Until it does, StaticPods may lack pods that exist (an
	// agent that just started has not read its manifest directory yet), so
	// SyncOnce deletes no mirror pod as orphaned, as kubelet deletes orphaned
	// mirror pods only once all its sources are ready. For Merger-fed
	// agents: merger.SeenAllSources. Default nil: always ready.
	SourcesReady func() bool
	// Period is how often Run syncs besides Trigger. Default 10s; 1s to 24h.
	Period time.Duration
	// Clock drives Run's ticker. Default the real clock.
	Clock clock.WithTicker
	// Created, if set, is called with each mirror pod SyncOnce created (or
	// found already made by an earlier attempt), as the API server returned
	// it, so that the static pod's status can be written to it at once
	// (status.Writer.SetMirrorPod). It must not block or modify the pod.
	// Default nil.
	Created func(mirror *v1.Pod)
}

// MirrorPods keeps a mirror pod in the API server for every static pod, as
// kubelet does: a copy of the static pod (metadata name, namespace, labels
// and annotations, and the spec) with the kubernetes.io/config.mirror
// annotation set to the static pod's config hash and a controller owner
// reference to the Node (without blockOwnerDeletion, which NodeRestriction
// forbids a node to set).
//
// SyncOnce takes the static pods from MirrorPodsOptions.StaticPods, reads
// the pods bound to the node (from NodePods, else a LIST with
// spec.nodeName=<node>), creates
// missing mirror pods, deletes and recreates those whose hash differs or
// whose deletion began, and deletes mirror pods whose static pod is gone
// (once SourcesReady says every source has reported).
// Every delete carries a UID precondition and grace period 0, so a pod
// recreated meanwhile under the same name is never deleted by mistake.
//
// A static pod whose name is taken by a pod that is not a mirror pod gets no
// mirror pod (an error says so). Static pods that reference other API
// objects are refused by ValidateStaticPod before they get here, as
// NodeRestriction would refuse their mirror pods.
type MirrorPods struct {
	pods       func(namespace string) MirrorPodClient
	nodes      NodeClient
	nodeName   string
	nodeUIDFn  func(ctx context.Context) (types.UID, error)
	staticPods func() []*v1.Pod
	nodePods   func() ([]*v1.Pod, bool)
	ready      func() bool
	created    func(*v1.Pod)
	period     time.Duration
	clock      clock.WithTicker
	trigger    chan struct{}

	mu      sync.Mutex
	nodeUID types.UID

	// Run's syncs, for TriggerWait (under mu): whether Run is running, how
	// many waits were asked, how many of them the last ended sync covered,
	// and a channel closed (and replaced) when a sync ends.
	running bool
	asked   uint64
	covered uint64
	ended   chan struct{}
}

// NewMirrorPods checks the options and returns MirrorPods.
func NewMirrorPods(opts MirrorPodsOptions) (*MirrorPods, error) {
	if opts.Pods == nil {
		return nil, optcheck.Required("podsource: MirrorPodsOptions.Pods")
	}
	if opts.Nodes == nil && opts.NodeUID == nil {
		return nil, fmt.Errorf("%w unless NodeUID is set", optcheck.Required("podsource: MirrorPodsOptions.Nodes"))
	}
	if err := checkNodeName("MirrorPodsOptions", &opts.NodeName); err != nil {
		return nil, err
	}
	if opts.StaticPods == nil {
		return nil, optcheck.Required("podsource: MirrorPodsOptions.StaticPods")
	}
	if err := checkDuration("MirrorPodsOptions.Period", &opts.Period, DefaultMirrorPeriod, MinPeriod, MaxPeriod); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &MirrorPods{
		pods:       opts.Pods,
		nodes:      opts.Nodes,
		nodeName:   opts.NodeName,
		nodeUIDFn:  opts.NodeUID,
		staticPods: opts.StaticPods,
		nodePods:   opts.NodePods,
		ready:      opts.SourcesReady,
		created:    opts.Created,
		period:     opts.Period,
		clock:      opts.Clock,
		trigger:    make(chan struct{}, 1),
		ended:      make(chan struct{}),
	}
	if m.nodeUIDFn == nil {
		m.nodeUIDFn = m.getNodeUID
	}
	return m, nil
}

// Trigger asks Run for a sync as soon as possible. It never blocks.
func (m *MirrorPods) Trigger() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// TriggerWait asks Run for a sync, as Trigger does, and waits until a sync
// that began after the call has ended (whether it failed or not: Run logs
// its errors): true. It gives up after timeout on the Clock, or when ctx
// ends: false. While Run is not running it returns true at once: there is
// no sync to wait for (an agent starts its static pods before it can reach
// the API server, as the kubelet does). The kubelet creates a static pod's
// mirror pod before it starts the pod's containers; an agent that calls
// TriggerWait before it hands a static pod to its pod workers does the
// same.
func (m *MirrorPods) TriggerWait(ctx context.Context, timeout time.Duration) bool {
	m.mu.Lock()
	if !m.running {
		m.mu.Unlock()
		return true
	}
	m.asked++
	want := m.asked
	m.mu.Unlock()
	m.Trigger()
	t := m.clock.NewTimer(timeout)
	defer t.Stop()
	for {
		m.mu.Lock()
		if !m.running || m.covered >= want {
			m.mu.Unlock()
			return true
		}
		ended := m.ended
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return false
		case <-ended:
		}
	}
}

// syncEnded records that a sync which began when asked waits had been
// asked has ended, and wakes TriggerWait's callers.
func (m *MirrorPods) syncEnded(asked uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.covered = asked
	close(m.ended)
	m.ended = make(chan struct{})
}

// setRunning records whether Run is running; when it stops, TriggerWait's
// callers return.
func (m *MirrorPods) setRunning(running bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running = running
	if !running {
		close(m.ended)
		m.ended = make(chan struct{})
	}
}

// Run syncs at once, then every Period and on Trigger, until ctx ends. Sync
// errors are logged; the next round retries.
func (m *MirrorPods) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	m.setRunning(true)
	defer m.setRunning(false)
	return loop.Run(ctx, m.clock, func(ctx context.Context) (time.Duration, error) {
		m.mu.Lock()
		asked := m.asked
		m.mu.Unlock()
		if err := m.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Mirror pod sync failed; retrying next round")
		}
		m.syncEnded(asked)
		return m.period, nil
	}, loop.Signal(m.trigger))
}

// SyncOnce makes the mirror pods match the static pods StaticPods returns
// (pods that are not static, and mirror pods, are ignored). It carries on
// past failures and returns them all.
func (m *MirrorPods) SyncOnce(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	// Readiness first: the static pods read after it include every pod
	// the sources had sent by then (a source that reports in between
	// would otherwise make its pods' mirror pods look orphaned).
	ready := m.ready == nil || m.ready()
	staticPods := m.staticPods()
	nodePods, err := m.listNodePods(ctx)
	if err != nil {
		return err
	}
	mirrors := map[string]*v1.Pod{}
	others := map[string]bool{}
	for _, p := range nodePods {
		if p.Spec.NodeName != m.nodeName {
			continue
		}
		if IsMirrorPod(p) {
			mirrors[FullName(p)] = p
		} else {
			others[FullName(p)] = true
		}
	}

	var errs []error
	wanted := map[string]bool{}
	for _, sp := range staticPods {
		if sp == nil || !IsStaticPod(sp) || IsMirrorPod(sp) {
			continue
		}
		fn := FullName(sp)
		if wanted[fn] {
			continue
		}
		wanted[fn] = true
		hash := staticHash(sp)
		existing := mirrors[fn]
		if existing != nil {
			if existing.Annotations[ConfigMirrorAnnotation] == hash && existing.DeletionTimestamp == nil {
				continue
			}
			logger.V(2).Info("Replacing a stale mirror pod", "pod", klog.KObj(existing), "podUID", existing.UID)
			if err := m.deleteMirror(ctx, existing); err != nil {
				errs = append(errs, err)
				continue
			}
		} else if others[fn] {
			errs = append(errs, fmt.Errorf("podsource: mirror pod %s: the name is taken by a pod that is not a mirror pod", klog.KObj(sp)))
			continue
		}
		if err := m.createMirror(ctx, sp, hash); err != nil {
			errs = append(errs, err)
		}
	}

	orphans := make([]string, 0)
	for fn := range mirrors {
		if !wanted[fn] {
			orphans = append(orphans, fn)
		}
	}
	if !ready {
		if len(orphans) > 0 {
			logger.V(2).Info("Not all pod sources have reported yet; orphaned mirror pods are kept until they have", "mirrorPods", orphans)
		}
		orphans = nil
	}
	sort.Strings(orphans)
	for _, fn := range orphans {
		p := mirrors[fn]
		logger.V(2).Info("Deleting an orphaned mirror pod", "pod", klog.KObj(p), "podUID", p.UID)
		if err := m.deleteMirror(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listNodePods returns the pods bound to the node: NodePods' view once it
// is complete, else a LIST.
func (m *MirrorPods) listNodePods(ctx context.Context) ([]*v1.Pod, error) {
	if m.nodePods != nil {
		if pods, ok := m.nodePods(); ok {
			return pods, nil
		}
	}
	list, err := m.pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", m.nodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("podsource: listing the node's pods: %w", err)
	}
	out := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func staticHash(p *v1.Pod) string {
	if h, ok := p.Annotations[ConfigHashAnnotation]; ok {
		return h
	}
	return string(p.UID)
}

// MirrorPodFor returns the mirror pod for a static pod, owned by the Node
// with the given UID. The node name goes through CanonicalNodeName (kept as
// given if that refuses it).
func MirrorPodFor(static *v1.Pod, nodeName string, nodeUID types.UID) *v1.Pod {
	if c, err := CanonicalNodeName(nodeName); err == nil {
		nodeName = c
	}
	annotations := make(map[string]string, len(static.Annotations)+1)
	for k, v := range static.Annotations {
		annotations[k] = v
	}
	annotations[ConfigMirrorAnnotation] = staticHash(static)
	var labels map[string]string
	if static.Labels != nil {
		labels = make(map[string]string, len(static.Labels))
		for k, v := range static.Labels {
			labels[k] = v
		}
	}
	controller := true
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        static.Name,
			Namespace:   static.Namespace,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       nodeName,
				UID:        nodeUID,
				Controller: &controller,
			}},
		},
		Spec: *static.Spec.DeepCopy(),
	}
}

func (m *MirrorPods) createMirror(ctx context.Context, sp *v1.Pod, hash string) error {
	uid, err := m.cachedNodeUID(ctx)
	if err != nil {
		return fmt.Errorf("podsource: mirror pod %s: node UID: %w", klog.KObj(sp), err)
	}
	mp := MirrorPodFor(sp, m.nodeName, uid)
	created, err := m.pods(mp.Namespace).Create(ctx, mp, metav1.CreateOptions{})
	switch {
	case err == nil:
		klog.FromContext(ctx).V(2).Info("Created a mirror pod", "pod", klog.KObj(mp))
		if m.created != nil {
			m.created(created)
		}
		return nil
	case apierrors.IsAlreadyExists(err):
		got, gerr := m.pods(mp.Namespace).Get(ctx, mp.Name, metav1.GetOptions{})
		if gerr == nil && got.Annotations[ConfigMirrorAnnotation] == hash && got.DeletionTimestamp == nil {
			if m.created != nil {
				m.created(got)
			}
			return nil
		}
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "UID mismatch"):
		m.mu.Lock()
		m.nodeUID = ""
		m.mu.Unlock()
	}
	return fmt.Errorf("podsource: creating mirror pod %s: %w", klog.KObj(mp), err)
}

func (m *MirrorPods) deleteMirror(ctx context.Context, p *v1.Pod) error {
	grace := int64(0)
	uid := p.UID
	err := m.pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or replaced by another pod we must not touch.
		return nil
	}
	return fmt.Errorf("podsource: deleting mirror pod %s (uid %s): %w", klog.KObj(p), uid, err)
}

func (m *MirrorPods) cachedNodeUID(ctx context.Context) (types.UID, error) {
	m.mu.Lock()
	uid := m.nodeUID
	m.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	uid, err := m.nodeUIDFn(ctx)
	if err != nil {
		return "", err
	}
	if uid == "" {
		return "", fmt.Errorf("node %s has no UID yet", m.nodeName)
	}
	m.mu.Lock()
	m.nodeUID = uid
	m.mu.Unlock()
	return uid, nil
}

func (m *MirrorPods) getNodeUID(ctx context.Context) (types.UID, error) {
	n, err := m.nodes.Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return n.UID, nil
}
