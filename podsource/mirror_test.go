package podsource

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

func staticPod(t *testing.T, name, image string) *v1.Pod {
	t.Helper()
	pod, err := DecodeManifest([]byte(manifest(name, image)), Origin{Source: FileSource, Location: "/m/" + name + ".yaml", NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// staticSet holds the static pods a test hands to MirrorPods through
// MirrorPodsOptions.StaticPods.
type staticSet struct {
	mu   sync.Mutex
	pods []*v1.Pod
}

func (s *staticSet) get() []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods
}

// sync sets the static pods and runs one mirror pod sync.
func (s *staticSet) sync(ctx context.Context, mp *MirrorPods, pods ...*v1.Pod) error {
	s.mu.Lock()
	s.pods = pods
	s.mu.Unlock()
	return mp.SyncOnce(ctx)
}

func mirrorWrites(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case k8stesting.CreateAction:
			out = append(out, "create "+a.GetObject().(*v1.Pod).Name)
		case k8stesting.DeleteAction:
			pre := ""
			if p := a.GetDeleteOptions().Preconditions; p != nil && p.UID != nil {
				pre = " uid=" + string(*p.UID)
			}
			out = append(out, "delete "+a.GetName()+pre)
		}
	}
	client.ClearActions()
	return out
}

func TestMirrorPodsFake(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	client := fake.NewClientset(node)
	// The fake gives created pods no UID; give them one, as the server would.
	n := 0
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n++
		a.(k8stesting.CreateAction).GetObject().(*v1.Pod).UID = types.UID("mirror-" + string(rune('0'+n)))
		return false, nil, nil
	})
	static := &staticSet{}
	var created []string
	mp, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), Nodes: client.CoreV1().Nodes(), NodeName: "n1", StaticPods: static.get,
		Created: func(p *v1.Pod) { created = append(created, p.Name+"/"+string(p.UID)) }})
	if err != nil {
		t.Fatal(err)
	}
	web := staticPod(t, "web", "web:1")
	apiPod := testPod("api", "uid-api")
	apiPod.Annotations = map[string]string{ConfigSourceAnnotation: APISource}

	if err := static.sync(ctx, mp, web, apiPod); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mirrorWrites(client), ","); got != "create web-n1" {
		t.Errorf("writes %s", got)
	}
	if got := strings.Join(created, ","); got != "web-n1/mirror-1" {
		t.Errorf("Created saw %q, want the created mirror pod with the server's UID", got)
	}
	got, err := client.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[ConfigMirrorAnnotation] != string(web.UID) || got.Annotations[ConfigHashAnnotation] != string(web.UID) {
		t.Errorf("mirror annotations %v", got.Annotations)
	}
	if refs := got.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != "n1" || refs[0].UID != "node-uid" ||
		refs[0].APIVersion != "v1" || refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion != nil {
		t.Errorf("owner references %+v", refs)
	}
	if got.Spec.NodeName != "n1" || got.Spec.Containers[0].Image != "web:1" {
		t.Errorf("mirror spec %+v", got.Spec)
	}

	// In step: nothing to do.
	if err := static.sync(ctx, mp, web); err != nil {
		t.Fatal(err)
	}
	if w := mirrorWrites(client); len(w) != 0 {
		t.Errorf("writes when in step: %v", w)
	}

	// Deleted by someone: recreated.
	if err := client.CoreV1().Pods("default").Delete(ctx, "web-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := static.sync(ctx, mp, web); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mirrorWrites(client), ","); got != "create web-n1" {
		t.Errorf("writes %s", got)
	}

	// The static pod changed: the stale mirror pod goes (with its UID as a
	// precondition) and a new one comes.
	web2 := staticPod(t, "web", "web:2")
	if err := static.sync(ctx, mp, web2); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mirrorWrites(client), ","); got != "delete web-n1 uid=mirror-2,create web-n1" {
		t.Errorf("writes %s", got)
	}

	// An orphaned mirror pod is deleted; a pod that is not a mirror pod is not.
	orphan := testPod("old-n1", "uid-orphan")
	orphan.Annotations = map[string]string{ConfigMirrorAnnotation: "h"}
	if _, err := client.CoreV1().Pods("default").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, testPod("plain", "uid-plain"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := static.sync(ctx, mp, web2); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mirrorWrites(client), ","); got != "delete old-n1 uid=mirror-4" {
		t.Errorf("writes %s", got)
	}

	// The static pod is gone: so is its mirror pod.
	if err := static.sync(ctx, mp); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mirrorWrites(client), ","); got != "delete web-n1 uid=mirror-3" {
		t.Errorf("writes %s", got)
	}

	// A static pod whose name a regular pod holds gets no mirror pod.
	plain := staticPod(t, "x", "x:1")
	plain.Name = "plain"
	err = static.sync(ctx, mp, plain)
	if err == nil || !strings.Contains(err.Error(), "not a mirror pod") {
		t.Errorf("name taken: %v", err)
	}
}

func TestMirrorPodsRun(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	client := fake.NewClientset()
	fc := clocktesting.NewFakeClock(seenTime)
	calls := make(chan struct{}, 10)
	web := staticPod(t, "web", "web:1")
	mp, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), Nodes: client.CoreV1().Nodes(), NodeName: "n1", Clock: fc,
		NodeUID:    func(context.Context) (types.UID, error) { return "node-uid", nil },
		StaticPods: func() []*v1.Pod { calls <- struct{}{}; return []*v1.Pod{web} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mp.Run(ctx) }()
	wait := func(what string) {
		t.Helper()
		testenv.Eventually(t, waitTimeout, 5*time.Millisecond, what, func() bool {
			select {
			case <-calls:
				return true
			default:
				return false
			}
		})
	}
	wait("first sync")
	// The period is measured from the end of a sync: step the clock once
	// Run waits.
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "wait after the first sync", fc.HasWaiters)
	fc.Step(DefaultMirrorPeriod)
	wait("sync on tick")
	mp.Trigger()
	wait("sync on trigger")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n1", metav1.GetOptions{}); err != nil {
		t.Errorf("mirror pod: %v", err)
	}

	if _, err := NewMirrorPods(MirrorPodsOptions{NodeName: "n1"}); err == nil || !strings.Contains(err.Error(), "MirrorPodsOptions.Pods") {
		t.Errorf("no client: %v", err)
	}
	if _, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), Nodes: client.CoreV1().Nodes(), NodeName: "n1"}); err == nil ||
		err.Error() != "podsource: MirrorPodsOptions.StaticPods is required" {
		t.Errorf("no StaticPods: %v", err)
	}
}

// TriggerWait returns once a sync that began after the call has ended (a
// sync already running when it is called does not count), gives up after
// its timeout on the clock or when its context ends, and returns at once
// while Run is not running or once it stops.
func TestMirrorPodsTriggerWait(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	client := fake.NewClientset()
	fc := clocktesting.NewFakeClock(seenTime)
	var static staticSet
	entered, release := make(chan struct{}), make(chan struct{})
	mp, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), Nodes: client.CoreV1().Nodes(), NodeName: "n1", Clock: fc,
		NodeUID: func(context.Context) (types.UID, error) { return "node-uid", nil },
		// Each sync reads the static pods, then waits for the test.
		StaticPods: func() []*v1.Pod {
			pods := static.get()
			entered <- struct{}{}
			<-release
			return pods
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if !mp.TriggerWait(ctx, time.Second) {
		t.Error("TriggerWait before Run: false, want true at once")
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- mp.Run(runCtx) }()
	testenv.Receive(t, entered, waitTimeout, "the first sync")
	release <- struct{}{}
	asked := func(n uint64) func() bool {
		return func() bool {
			mp.mu.Lock()
			defer mp.mu.Unlock()
			return mp.asked == n
		}
	}
	waitResult := func() chan bool {
		got := make(chan bool, 1)
		go func() { got <- mp.TriggerWait(ctx, time.Second) }()
		return got
	}
	mirrorExists := func() bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
		return err == nil
	}

	// A sync that read the static pods before the call does not count.
	mp.Trigger()
	testenv.Receive(t, entered, waitTimeout, "a sync that read the empty set")
	static.mu.Lock()
	static.pods = []*v1.Pod{staticPod(t, "web", "web:1")}
	static.mu.Unlock()
	got := waitResult()
	testenv.Eventually(t, waitTimeout, time.Millisecond, "TriggerWait asked", asked(1))
	release <- struct{}{}
	testenv.Receive(t, entered, waitTimeout, "the sync TriggerWait asked for")
	select {
	case <-got:
		t.Fatal("TriggerWait returned when a sync that began before it ended")
	default:
	}
	release <- struct{}{}
	if !testenv.Receive(t, got, waitTimeout, "TriggerWait's result") {
		t.Fatal("TriggerWait: false, want true")
	}
	if !mirrorExists() {
		t.Error("TriggerWait returned before the sync it asked for created the mirror pod")
	}

	// Its timeout runs on the clock while a sync holds.
	got = waitResult()
	testenv.Receive(t, entered, waitTimeout, "the sync TriggerWait asked for")
	testenv.Eventually(t, waitTimeout, time.Millisecond, "TriggerWait's timer", fc.HasWaiters)
	fc.Step(time.Second)
	if testenv.Receive(t, got, waitTimeout, "TriggerWait's result") {
		t.Error("TriggerWait past its timeout: true, want false")
	}
	release <- struct{}{}

	// Its context.
	cctx, cancel := context.WithCancel(ctx)
	got = make(chan bool, 1)
	go func() { got <- mp.TriggerWait(cctx, time.Hour) }()
	testenv.Receive(t, entered, waitTimeout, "the sync TriggerWait asked for")
	cancel()
	if testenv.Receive(t, got, waitTimeout, "TriggerWait's result") {
		t.Error("TriggerWait with its context ended: true, want false")
	}
	release <- struct{}{}

	// Run's end releases it while a sync that began before it holds.
	mp.Trigger()
	testenv.Receive(t, entered, waitTimeout, "a sync")
	got = waitResult()
	testenv.Eventually(t, waitTimeout, time.Millisecond, "TriggerWait asked", asked(4))
	stop()
	release <- struct{}{}
	if !testenv.Receive(t, got, waitTimeout, "TriggerWait's result") {
		t.Error("TriggerWait when Run ended: false, want true")
	}
	if err := testenv.Receive(t, done, waitTimeout, "Run's return"); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// With NodePods, a sync reads mirror pods from the watch's view and makes
// no LIST; while that view is not complete it LISTs.
func TestMirrorPodsFromNodePods(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	client := fake.NewClientset(node)
	static := &staticSet{}
	var view []*v1.Pod
	synced := false
	mp, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), Nodes: client.CoreV1().Nodes(), NodeName: "n1", StaticPods: static.get,
		NodePods: func() ([]*v1.Pod, bool) { return view, synced }})
	if err != nil {
		t.Fatal(err)
	}
	web := staticPod(t, "web", "web:1")
	verbs := func() string {
		var v []string
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "pods" {
				v = append(v, a.GetVerb())
			}
		}
		client.ClearActions()
		return strings.Join(v, ",")
	}
	if err := static.sync(ctx, mp, web); err != nil {
		t.Fatal(err)
	}
	if got := verbs(); got != "list,create" {
		t.Errorf("before the view is complete: %s, want list,create", got)
	}
	mirror, err := client.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	view, synced = []*v1.Pod{mirror}, true
	for range 3 {
		if err := static.sync(ctx, mp, web); err != nil {
			t.Fatal(err)
		}
	}
	if got := verbs(); got != "" {
		t.Errorf("in step, from the view: %s, want no request", got)
	}
	// The static pod goes: its mirror pod, seen in the view, is deleted.
	if err := static.sync(ctx, mp); err != nil {
		t.Fatal(err)
	}
	if got := verbs(); got != "delete" {
		t.Errorf("static pod gone: %s, want delete", got)
	}
}

// podsOf is MirrorPodsOptions.Pods for a core/v1 client.
func podsOf(c corev1client.CoreV1Interface) func(string) MirrorPodClient {
	return func(ns string) MirrorPodClient { return c.Pods(ns) }
}

// Until every source has reported, a mirror pod without a static pod is
// kept: a restarted agent has not read its manifests yet. Once they have
// reported, it is deleted.
func TestMirrorPodsKeepOrphansUntilSourcesReady(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	orphan := testPod("web-n1", "uid-mirror")
	orphan.Annotations = map[string]string{ConfigMirrorAnnotation: "h"}
	client := fake.NewClientset(node, orphan)
	static := &staticSet{}
	var ready atomic.Bool
	mp, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), Nodes: client.CoreV1().Nodes(), NodeName: "n1",
		StaticPods: static.get, SourcesReady: ready.Load})
	if err != nil {
		t.Fatal(err)
	}
	if err := static.sync(ctx, mp); err != nil {
		t.Fatal(err)
	}
	if got := mirrorWrites(client); len(got) != 0 {
		t.Errorf("writes before the sources are ready: %v; want none", got)
	}
	ready.Store(true)
	if err := static.sync(ctx, mp); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mirrorWrites(client), ","); got != "delete web-n1 uid=uid-mirror" {
		t.Errorf("writes once the sources are ready: %s", got)
	}
}

// A source that reports while a sync runs (after the sync read the static
// pods, before it looked for orphans) does not make its pod's mirror pod
// look orphaned: readiness is read before the static pods.
func TestMirrorPodsSourceReadyMidSync(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	sp := staticPod(t, "web", "nginx:1")
	mirror := testPod("web-n1", "uid-mirror")
	mirror.Annotations = map[string]string{ConfigMirrorAnnotation: sp.Annotations[ConfigHashAnnotation]}
	client := fake.NewClientset(node, mirror)
	var ready atomic.Bool
	var reads atomic.Int32
	static := func() []*v1.Pod {
		if reads.Add(1) == 1 {
			// The file source reports just after this read.
			ready.Store(true)
			return nil
		}
		return []*v1.Pod{sp}
	}
	mp, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), Nodes: client.CoreV1().Nodes(), NodeName: "n1",
		StaticPods: static, SourcesReady: ready.Load})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := mp.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := mirrorWrites(client); len(got) != 0 {
		t.Errorf("writes: %v; want none (the mirror pod is the static pod's)", got)
	}
}
