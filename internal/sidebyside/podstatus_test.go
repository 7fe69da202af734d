package sidebyside

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/internal/testenv"
)

// TestPodStatusDiff runs the same pods (scenarios) on the kubelet and on
// examples/agent, one node after the other, on each containerd asked for
// (STATUS_DIFF_RUNTIMES, default "1,2"), records each pod's status once
// it has settled with the reasons of its events, and prints what differs
// after normalising what timing decides, then a table: scenario, runtime,
// same/accepted/different. Differences nodekit makes on purpose
// (acceptedDiffs) are printed as accepted. It runs only when
// NODEKIT_STATUS_DIFF=1 (hack/pod-status-diff.sh sets it) and fails when a
// scenario differs in a way not accepted (STATUS_DIFF_REPORT_ONLY=1: it
// only prints).
func TestPodStatusDiff(t *testing.T) {
	if os.Getenv("NODEKIT_STATUS_DIFF") != "1" {
		t.Skip("set NODEKIT_STATUS_DIFF=1 (hack/pod-status-diff.sh) to compare pod statuses with the kubelet's")
	}
	if os.Geteuid() != 0 {
		t.Fatal("NODEKIT_STATUS_DIFF=1 needs root: the kubelet and the containerd harness run as root")
	}
	runtimes := "1,2"
	if s := os.Getenv("STATUS_DIFF_RUNTIMES"); s != "" {
		runtimes = s
	}
	only := os.Getenv("STATUS_DIFF_ONLY") // a regexp over scenario names
	var sel []scenario
	for _, s := range scenarios() {
		if ok, _ := regexp.MatchString(only, s.name); only == "" || ok {
			sel = append(sel, s)
		}
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, 50*time.Minute)
	defer cancel()
	agentBin := buildAgent(t, t.TempDir())
	var rows []diffRow
	for _, r := range strings.Split(runtimes, ",") {
		major := map[string]int{"1": 1, "2": 2}[strings.TrimSpace(r)]
		if major == 0 {
			t.Fatalf("STATUS_DIFF_RUNTIMES=%q: want 1, 2 or 1,2", runtimes)
		}
		runtime := fmt.Sprintf("containerd %d", major)
		t.Run(fmt.Sprintf("containerd%d", major), func(t *testing.T) {
			b := &bench{t: t, ctx: ctx, major: major, bridge: true, maxPods: 110, agentBin: agentBin}
			b.setUp()
			rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: diffRuntimeClass}, Handler: "nosuch"}
			if _, err := b.admin.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			rec := map[string]map[string]*podRecord{}
			for _, kind := range []string{kubelet, nodekit} {
				rec[kind] = b.runScenarios(kind, fmt.Sprintf("diff-%s-c%d", kind, major), sel)
			}
			for _, s := range sel {
				rows = append(rows, compareRecords(runtime, s.name, rec[kubelet][s.name], rec[nodekit][s.name]))
			}
		})
	}
	failed := printDiff(rows)
	if failed > 0 && os.Getenv("STATUS_DIFF_REPORT_ONLY") != "1" {
		t.Errorf("%d scenario runs differ from the kubelet in ways not accepted", failed)
	}
}

// podRecord is what was recorded of one pod.
type podRecord struct {
	uid     string
	status  corev1.PodStatus
	reasons []string          // event reasons, sorted, each once
	note    string            // "not settled within 2m0s"
	flat    map[string]string // flattenStatus, and "events": the reasons
}

// diffWatch keeps the last version of each pod bound to one node.
type diffWatch struct {
	mu      sync.Mutex
	last    map[string]*corev1.Pod
	norm    map[string]string    // normalised status, to see it change
	changed map[string]time.Time // when norm last changed
	gone    map[string]bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func (b *bench) watchDiffPods(nodeName string) *diffWatch {
	t := b.t
	ctx, cancel := context.WithCancel(b.ctx)
	dw := &diffWatch{last: map[string]*corev1.Pod{}, norm: map[string]string{}, changed: map[string]time.Time{},
		gone: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(dw.stop)
	sel := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	pods := b.admin.CoreV1().Pods("default")
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	rv := list.ResourceVersion
	go func() {
		defer close(dw.done)
		for ctx.Err() == nil {
			w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				tm := time.NewTimer(100 * time.Millisecond)
				select {
				case <-ctx.Done():
				case <-tm.C:
				}
				tm.Stop()
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type != watch.Bookmark {
					dw.record(ev.Type, p, b.nodeIP, b.subnet)
				}
			}
			w.Stop()
		}
	}()
	return dw
}

func (dw *diffWatch) stop() {
	dw.cancel()
	<-dw.done
}

func (dw *diffWatch) record(typ watch.EventType, p *corev1.Pod, nodeIP string, subnet *net.IPNet) {
	n := normalisedJSON(p.Status, nodeIP, subnet)
	dw.mu.Lock()
	defer dw.mu.Unlock()
	if o := dw.last[p.Name]; o != nil && o.UID != p.UID {
		delete(dw.gone, p.Name)
	}
	dw.last[p.Name] = p
	if dw.norm[p.Name] != n {
		dw.norm[p.Name], dw.changed[p.Name] = n, time.Now()
	}
	if typ == watch.Deleted {
		dw.gone[p.Name] = true
	}
}

func (dw *diffWatch) get(name string) (p *corev1.Pod, changed time.Time, gone bool) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return dw.last[name], dw.changed[name], dw.gone[name]
}

// runScenarios starts a node of kind, creates every scenario's pod at
// once, records each when it has settled, deletes them, and stops and
// cleans up the node.
func (b *bench) runScenarios(kind, nodeName string, sel []scenario) map[string]*podRecord {
	t := b.t
	b.phase(kind, "start")
	n, ready := b.startNode(kind, nodeName)
	select {
	case <-ready:
	case <-n.done:
		n.alive()
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s %s not Ready within 2m; its log ends with:\n%s", kind, nodeName, tail(n.log, 40))
	}
	dw := b.watchDiffPods(nodeName)
	created := map[string]time.Time{}
	for _, s := range sel {
		b.create(b.diffPod(s, nodeName))
		created[s.name] = time.Now()
	}
	b.phase(kind, fmt.Sprintf("%d pods created", len(sel)))
	out := map[string]*podRecord{}
	deleted := map[string]bool{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(out) < len(sel) {
		n.alive()
		b.alive()
		now := time.Now()
		for _, s := range sel {
			if out[s.name] != nil {
				continue
			}
			p, changed, gone := dw.get(s.name)
			deadline := s.deadline
			if deadline == 0 {
				deadline = 2 * time.Minute
			}
			steady := s.steady
			if steady == 0 {
				steady = 3 * time.Second
			}
			late := now.Sub(created[s.name]) > deadline
			switch {
			case p == nil:
				if late {
					out[s.name] = &podRecord{note: "never seen"}
				}
			case s.deleteWhen != nil:
				if !deleted[s.name] && s.deleteWhen(p) {
					b.deleteGrace(s.name, s.deleteGrace)
					deleted[s.name] = true
				}
				if gone || late {
					out[s.name] = &podRecord{uid: string(p.UID), status: p.Status}
					if !gone {
						out[s.name].note = fmt.Sprintf("not gone within %v", deadline)
					}
				}
			case s.done(p) && now.Sub(changed) >= steady:
				out[s.name] = &podRecord{uid: string(p.UID), status: p.Status}
			case late:
				out[s.name] = &podRecord{uid: string(p.UID), status: p.Status, note: fmt.Sprintf("not settled within %v", deadline)}
			}
			if r := out[s.name]; r != nil {
				b.phase(kind, fmt.Sprintf("%s recorded after %v %s", s.name, now.Sub(created[s.name]).Round(time.Second), r.note))
			}
		}
		select {
		case <-tick.C:
		case <-b.ctx.Done():
			b.alive()
		}
	}
	// Events, by the pod's UID, once everything has settled.
	for _, r := range out {
		if r.uid != "" {
			r.reasons = b.eventReasons(r.uid)
		}
		r.flat = flattenStatus(r.status, b.nodeIP, b.subnet)
		r.flat["events"] = strings.Join(r.reasons, ",")
	}
	b.phase(kind, "deleting the pods")
	uids := map[string]bool{}
	for _, s := range sel {
		if r := out[s.name]; r != nil && r.uid != "" {
			uids[r.uid] = true
		}
		if _, _, gone := dw.get(s.name); !gone {
			b.deleteGrace(s.name, 0)
		}
	}
	testenv.Eventually(t, 2*time.Minute, 50*time.Millisecond, "the scenario pods gone from the API", func() bool {
		b.alive()
		for _, s := range sel {
			if _, _, gone := dw.get(s.name); !gone {
				return false
			}
		}
		return true
	})
	b.waitNoSandboxes(uids, 2*time.Minute, false)
	dw.stop()
	b.phase(kind, "stop and clean up")
	n.clean()
	return out
}

func (b *bench) deleteGrace(name string, grace int64) {
	b.t.Helper()
	err := b.admin.CoreV1().Pods("default").Delete(b.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		b.t.Fatal(err)
	}
}

// eventReasons returns the reasons of the events about the pod with uid,
// sorted, each once.
func (b *bench) eventReasons(uid string) []string {
	b.t.Helper()
	evs, err := b.admin.CoreV1().Events("default").List(b.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", uid).String()})
	if err != nil {
		b.t.Fatal(err)
	}
	set := map[string]bool{}
	for _, e := range evs.Items {
		set[e.Reason] = true
	}
	var out []string
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Normalising.

var (
	uidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hexIDRE   = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	backoffRE = regexp.MustCompile(`back-off [0-9ms.]+ `)
	ipRE      = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)
	tmpDirRE  = regexp.MustCompile(`/tmp/nodekit-bench-[a-z]+-[0-9]+`)
)

// timeKeys are fields whose value is a time.
var timeKeys = map[string]bool{
	"lastTransitionTime": true, "lastProbeTime": true, "startTime": true,
	"startedAt": true, "finishedAt": true,
}

// normaliseText replaces what differs between runs in a message: UIDs,
// container IDs, back-off durations, IP addresses and the nodes' temporary
// directories.
func normaliseText(s string) string {
	s = uidRE.ReplaceAllString(s, "<uid>")
	s = hexIDRE.ReplaceAllString(s, "<id>")
	s = backoffRE.ReplaceAllString(s, "back-off <d> ")
	s = ipRE.ReplaceAllString(s, "<ip>")
	s = tmpDirRE.ReplaceAllString(s, "<node dir>")
	return s
}

// classifyIP says what an address is: the node's, one of the pod network,
// or itself.
func classifyIP(ip, nodeIP string, subnet *net.IPNet) string {
	switch {
	case ip == "":
		return "unset"
	case ip == nodeIP:
		return "<node IP>"
	case subnet != nil && subnet.Contains(net.ParseIP(ip)):
		return "<pod network IP>"
	}
	return ip
}

// flattenStatus turns a pod status into JSON paths and normalised values:
// times "set", container and image IDs "set", restart counts past 1 ">1",
// IPs classified, messages normalised; lists of containers and conditions
// keyed by name and type.
func flattenStatus(s corev1.PodStatus, nodeIP string, subnet *net.IPNet) map[string]string {
	data, _ := json.Marshal(s)
	var v any
	_ = json.Unmarshal(data, &v)
	out := map[string]string{}
	var walk func(path, key string, v any)
	walk = func(path, key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, k, e)
			}
		case []any:
			for i, e := range x {
				idx := fmt.Sprint(i)
				if m, ok := e.(map[string]any); ok {
					switch {
					case m["name"] != nil:
						idx = fmt.Sprintf("name=%v", m["name"])
					case m["type"] != nil:
						idx = fmt.Sprintf("type=%v", m["type"])
					}
				}
				walk(fmt.Sprintf("%s[%s]", path, idx), key, e)
			}
		case nil:
		default:
			val := fmt.Sprint(x)
			switch {
			case timeKeys[key]:
				val = "set"
			case key == "containerID" || key == "imageID":
				val = "set"
			case key == "restartCount":
				if f, ok := x.(float64); ok && f > 1 {
					val = ">1"
				}
			case key == "podIP" || key == "hostIP" || key == "ip":
				val = classifyIP(val, nodeIP, subnet)
			case key == "message" || key == "reason":
				val = normaliseText(val)
			}
			out[path] = val
		}
	}
	walk("status", "", v)
	return out
}

func normalisedJSON(s corev1.PodStatus, nodeIP string, subnet *net.IPNet) string {
	data, _ := json.Marshal(flattenStatus(s, nodeIP, subnet))
	return string(data)
}

// Comparing.

// acceptedDiff is a difference nodekit makes on purpose, documented in the
// "Differences from the kubelet" section of the package named in why.
type acceptedDiff struct {
	scenario *regexp.Regexp // nil: every scenario
	path     *regexp.Regexp
	kubelet  *regexp.Regexp // nil: whatever the kubelet's value
	why      string
}

// acceptedDiffs lists the differences nodekit makes on purpose.
var acceptedDiffs = []acceptedDiff{{
	scenario: regexp.MustCompile(`^(always-exit[01]|onfailure-exit1|init-fail-(always|onfailure))$`),
	path:     regexp.MustCompile(`^status\.(initC|c)ontainerStatuses\[name=[^]]+\]\.state\.`),
	why: "crash-loop back-off: nodekit shows the container waiting (CrashLoopBackOff) from its exit on, the kubelet shows the exit " +
		"until a sync of the pod falls within the back-off (podsync)",
}, {
	path:    regexp.MustCompile(`^status\.resources\.limits\.memory$`),
	kubelet: regexp.MustCompile(`^(9007199254740988Ki|\(absent\))$`),
	why: "pod-level resources: nodekit reports the pod's effective limits, the kubelet reads a pod Running in the API back " +
		"from its cgroup, where no memory limit reads as the cgroup's maximum and a cgroup already gone as none (podsync)",
}}

func (a acceptedDiff) matches(scenario, path, kubeletValue string) bool {
	return (a.scenario == nil || a.scenario.MatchString(scenario)) && a.path.MatchString(path) &&
		(a.kubelet == nil || a.kubelet.MatchString(kubeletValue))
}

// fieldDiff is one path whose values differ.
type fieldDiff struct {
	path, kubelet, nodekit string
	accepted               string // why, when accepted
}

// diffRow is one scenario on one runtime.
type diffRow struct {
	runtime, scenario string
	diffs             []fieldDiff
	notes             []string
}

func (r diffRow) result() string {
	res := "same"
	for _, d := range r.diffs {
		if d.accepted == "" {
			return "different"
		}
		res = "accepted"
	}
	return res
}

// compareRecords compares one scenario's records, status and event
// reasons. Values are normalised with the machine's node IP and the pod
// network as they were at the time: both nodes ran on one of each.
func compareRecords(runtime, scenario string, k, n *podRecord) diffRow {
	row := diffRow{runtime: runtime, scenario: scenario}
	if k == nil || n == nil {
		row.diffs = append(row.diffs, fieldDiff{path: "(record)", kubelet: fmt.Sprint(k != nil), nodekit: fmt.Sprint(n != nil)})
		return row
	}
	for who, r := range map[string]*podRecord{kubelet: k, nodekit: n} {
		if r.note != "" {
			row.notes = append(row.notes, who+": "+r.note)
		}
	}
	sort.Strings(row.notes)
	a, b := k.flat, n.flat
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	var sorted []string
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	for _, p := range sorted {
		av, aok := a[p]
		bv, bok := b[p]
		if av == bv && aok == bok {
			continue
		}
		if !aok {
			av = "(absent)"
		}
		if !bok {
			bv = "(absent)"
		}
		d := fieldDiff{path: p, kubelet: av, nodekit: bv}
		for _, acc := range acceptedDiffs {
			if acc.matches(scenario, p, av) {
				d.accepted = acc.why
				break
			}
		}
		row.diffs = append(row.diffs, d)
	}
	return row
}

// printDiff prints each differing scenario's fields, then the table; it
// returns how many rows differ in ways not accepted.
func printDiff(rows []diffRow) int {
	failed := 0
	for _, r := range rows {
		if len(r.diffs) == 0 && len(r.notes) == 0 {
			continue
		}
		fmt.Printf("DIFF %s on %s: %s\n", r.scenario, r.runtime, r.result())
		for _, n := range r.notes {
			fmt.Printf("DIFF   note: %s\n", n)
		}
		for _, d := range r.diffs {
			acc := ""
			if d.accepted != "" {
				acc = "  [accepted: " + d.accepted + "]"
			}
			fmt.Printf("DIFF   %s: kubelet %q, nodekit %q%s\n", d.path, d.kubelet, d.nodekit, acc)
		}
	}
	fmt.Println()
	fmt.Println("| scenario | runtime | result |")
	fmt.Println("|---|---|---|")
	for _, r := range rows {
		res := r.result()
		if res == "different" {
			failed++
		}
		if len(r.notes) > 0 {
			res += " (" + strings.Join(r.notes, "; ") + ")"
		}
		fmt.Printf("| %s | %s | %s |\n", r.scenario, r.runtime, res)
	}
	return failed
}
