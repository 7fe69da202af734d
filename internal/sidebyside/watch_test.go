package sidebyside

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// watchNodeReady opens a watch on Node name before returning and delivers
// the time it first sees the node Ready=True.
func (b *bench) watchNodeReady(name string) <-chan time.Time {
	t := b.t
	out := make(chan time.Time, 1)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	nodes := b.admin.CoreV1().Nodes()
	list, err := nodes.List(b.ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	w, err := nodes.Watch(b.ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			now := time.Now()
			if n, ok := ev.Object.(*corev1.Node); ok && nodeReady(n) {
				out <- now
				return
			}
		}
	}()
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// seen is what a pod watch saw of one pod, by the time of the first event
// showing each state.
type seen struct {
	uid                            string
	added, running, ready, deleted time.Time
	unready                        time.Time // first seen not Ready after Ready
}

// podWatch watches the pods bound to one node (namespace default) from the
// admin client and records when it first saw each in each state.
type podWatch struct {
	mu      sync.Mutex
	pods    map[string]*seen
	changed chan struct{} // closed and replaced on every event
	cancel  context.CancelFunc
	done    chan struct{}
}

func (b *bench) watchPods(nodeName string) *podWatch {
	t := b.t
	ctx, cancel := context.WithCancel(b.ctx)
	pw := &podWatch{pods: map[string]*seen{}, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	t.Cleanup(pw.stop)
	sel := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	pods := b.admin.CoreV1().Pods("default")
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	rv := list.ResourceVersion
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(pw.done)
		for {
			for ev := range w.ResultChan() {
				if p, ok := ev.Object.(*corev1.Pod); ok {
					rv = p.ResourceVersion
					if ev.Type != watch.Bookmark {
						pw.record(ev.Type, p, time.Now())
					}
				}
			}
			w.Stop()
			var ok bool
			if w, ok = rewatch(ctx, func() (watch.Interface, error) {
				return pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
			}); !ok {
				return
			}
		}
	}()
	return pw
}

func (pw *podWatch) stop() {
	pw.cancel()
	<-pw.done
}

func (pw *podWatch) record(typ watch.EventType, p *corev1.Pod, now time.Time) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	s := pw.pods[p.Name]
	if s == nil || (s.uid != string(p.UID) && !s.deleted.IsZero()) {
		s = &seen{uid: string(p.UID), added: now}
		pw.pods[p.Name] = s
	}
	if s.running.IsZero() && p.Status.Phase == corev1.PodRunning {
		s.running = now
	}
	if s.ready.IsZero() && podReady(p) {
		s.ready = now
	} else if !s.ready.IsZero() && s.unready.IsZero() && !podReady(p) && typ != watch.Deleted {
		s.unready = now
	}
	if typ == watch.Deleted {
		s.deleted = now
	}
	close(pw.changed)
	pw.changed = make(chan struct{})
}

// get returns a copy of what was seen of pod name.
func (pw *podWatch) get(name string) seen {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if s := pw.pods[name]; s != nil {
		return *s
	}
	return seen{}
}

// wait waits until cond (given what was seen of pod name) holds, or fails
// after timeout.
func (b *bench) wait(pw *podWatch, name, what string, timeout time.Duration, cond func(seen) bool) seen {
	b.t.Helper()
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	for {
		pw.mu.Lock()
		var s seen
		if p := pw.pods[name]; p != nil {
			s = *p
		}
		ch := pw.changed
		pw.mu.Unlock()
		if cond(s) {
			return s
		}
		select {
		case <-ch:
		case <-tm.C:
			b.t.Fatalf("pod %s: not %s within %v", name, what, timeout)
		case <-b.ctx.Done():
			b.t.Fatalf("pod %s: not %s: %v", name, what, b.ctx.Err())
		}
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event that is counted.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// auditPolicy logs requests of node identities at Metadata level, once
// their response has started (and, for watches, again when it completes).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
`

// requests counts the requests of system:node:<nodeName> the API server
// received in [from, to), from its audit log, with a count per verb and
// resource.
func (b *bench) requests(nodeName string, from, to time.Time) (int, map[string]int) {
	b.t.Helper()
	data, err := os.ReadFile(b.auditLog)
	if err != nil {
		b.t.Fatal(err)
	}
	user := "system:node:" + nodeName
	ids := map[string]bool{}
	detail := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, user) {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			continue // a line being written
		}
		if ev.User.Username != user || ids[ev.AuditID] || ev.RequestReceived.Before(from) || !ev.RequestReceived.Before(to) {
			continue
		}
		ids[ev.AuditID] = true
		what := ev.Verb
		if ev.ObjectRef != nil {
			what += " " + ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
		}
		detail[what]++
	}
	return len(ids), detail
}

func formatDetail(d map[string]int, scale float64) string {
	var keys []string
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(d[k])*scale))
	}
	return strings.Join(parts, ", ")
}

// watchStatusReports watches Node name from the admin client and delivers
// the time it sees each status report: an update that moves the Ready
// condition's lastHeartbeatTime, which both nodes set at every report.
// Reports the receiver has not taken when the buffer is full are dropped.
// stop ends the watch.
func (b *bench) watchStatusReports(name string) (reports <-chan time.Time, stop func()) {
	t := b.t
	ctx, cancel := context.WithCancel(b.ctx)
	out := make(chan time.Time, 16)
	done := make(chan struct{})
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	nodes := b.admin.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("listing node %s: %d found, %v", name, len(list.Items), err)
	}
	last := heartbeat(&list.Items[0])
	rv := list.ResourceVersion
	w, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		for {
			for ev := range w.ResultChan() {
				n, ok := ev.Object.(*corev1.Node)
				if !ok {
					continue
				}
				rv = n.ResourceVersion
				if hb := heartbeat(n); !hb.Equal(last) {
					last = hb
					select {
					case out <- time.Now():
					default:
					}
				}
			}
			w.Stop()
			var ok bool
			if w, ok = rewatch(ctx, func() (watch.Interface, error) {
				return nodes.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
			}); !ok {
				return
			}
		}
	}()
	return out, func() { cancel(); <-done }
}

// heartbeat is the lastHeartbeatTime of n's Ready condition (zero when it
// has none).
func heartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

// rewatch opens a watch again with open, every 100ms until it opens, after
// the server ended the last one (it ends watches after a while; open goes
// on from the last version seen). It returns false when ctx ends first.
func rewatch(ctx context.Context, open func() (watch.Interface, error)) (watch.Interface, bool) {
	for {
		if ctx.Err() != nil {
			return nil, false
		}
		if w, err := open(); err == nil {
			return w, true
		}
		tm := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			tm.Stop()
			return nil, false
		case <-tm.C:
		}
	}
}

// objectSizes reports the encoded sizes of the node's Lease and Node as
// the API server stores them, whole and without their managed fields, and
// what each carries most: these are what a renewal's and a status report's
// answers (and a node watch's events) hold, so they explain the idle bytes
// received.
func (b *bench) objectSizes(kind, nodeName string) {
	ctx := b.ctx
	lease, err := b.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		report("%s: object sizes: lease: %v", kind, err)
		return
	}
	node, err := b.admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		report("%s: object sizes: node: %v", kind, err)
		return
	}
	managers := func(m metav1.ObjectMeta) string {
		var parts []string
		for _, e := range m.ManagedFields {
			parts = append(parts, fmt.Sprintf("%s/%s/%s %d", e.Manager, e.Operation, e.Subresource, e.Size()))
		}
		return strings.Join(parts, ", ")
	}
	leaseAll := lease.Size()
	nodeAll := node.Size()
	leaseMF, nodeMF := lease.DeepCopy(), node.DeepCopy()
	leaseMF.ManagedFields, nodeMF.ManagedFields = nil, nil
	report("%s: object sizes (protobuf): Lease %d bytes, %d without managed fields (%s); Node %d bytes, %d without managed fields (%s): metadata %d, spec %d, status %d (images %d in %d, conditions %d, node info %d, addresses %d, %d labels, %d annotations)",
		kind, leaseAll, leaseMF.Size(), managers(lease.ObjectMeta), nodeAll, nodeMF.Size(), managers(node.ObjectMeta),
		nodeMF.ObjectMeta.Size(), node.Spec.Size(), node.Status.Size(), sizes(node.Status.Images), len(node.Status.Images),
		sizes(node.Status.Conditions), node.Status.NodeInfo.Size(), sizes(node.Status.Addresses), len(node.Labels), len(node.Annotations))
}

// sizes sums the encoded sizes of a list's elements.
func sizes[T any, P interface {
	*T
	Size() int
}](l []T) (n int) {
	for i := range l {
		n += P(&l[i]).Size()
	}
	return n
}

// arrival is a rise of the bytes a node received, seen at one sample.
type arrival struct {
	at    time.Time
	bytes int64
}

// watchReceipts samples the bytes the node receives from the API server
// every 50 ms until the returned function is called, and that function
// summarises the arrivals between from and to (summarizeArrivals), so
// that what the idle bytes are made of (renewals' answers, status reports'
// answers, watch events, bookmarks) can be told apart.
//
// The sampling also stops when the test ends first (a phase that fails).
func (b *bench) watchReceipts(n *node) func(from, to time.Time) string {
	var arrivals []arrival
	stop, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	end := func() {
		once.Do(func() { close(stop) })
		<-done
	}
	b.t.Cleanup(end)
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		last := n.proxy.BytesReceived()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				if cur := n.proxy.BytesReceived(); cur != last {
					arrivals = append(arrivals, arrival{now, cur - last})
					last = cur
				}
			}
		}
	}()
	return func(from, to time.Time) string {
		end()
		return summarizeArrivals(arrivals, from, to)
	}
}

// summarizeArrivals gives the total of the arrivals from from to to
// (inclusive) and each size with how many times it arrived, smallest
// first: "26859 bytes: 114×5 623×15 4504×1".
func summarizeArrivals(arrivals []arrival, from, to time.Time) string {
	bySize := map[int64]int{}
	var total int64
	for _, a := range arrivals {
		if a.at.Before(from) || a.at.After(to) {
			continue
		}
		bySize[a.bytes]++
		total += a.bytes
	}
	sizes := make([]int64, 0, len(bySize))
	for s := range bySize {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	parts := make([]string, 0, len(sizes))
	for _, s := range sizes {
		parts = append(parts, fmt.Sprintf("%d×%d", s, bySize[s]))
	}
	return fmt.Sprintf("%d bytes: %s", total, strings.Join(parts, " "))
}
