package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/remote"
)

// containerd (1.6.20 and v2.4.2 alike) keeps the task of a StartContainer or RunPodSandbox
// whose caller went away after the task was created and before its pid was
// read: the tasks service's Create then fails with "failed to get task pid:
// context canceled" and nothing deletes the task
// (containerd/containerd#11037). An agent SIGKILLed while it starts pods
// leaves exactly that, and no CRI call clears it:
//
//   - a container's task stays CREATED, its runc init alive in the pod's
//     cgroup; the CRI reports the container exited (exit code 128, reason
//     StartError, never started), StopContainer does nothing to it, and
//     RemoveContainer fails with FailedPrecondition ("cannot delete
//     running task") for as long as the task exists;
//   - a sandbox's task stays CREATED likewise; the CRI reports the sandbox
//     NOTREADY, and StopPodSandbox and RemovePodSandbox succeed but leave
//     the task, its runc init and its rootfs mount behind (and, deleted
//     first, the task leaves behind it the sandbox's containerd container,
//     which the CRI forgets but holds no process and no mount).
//
// The agent survives it (such a container is replaced as a restart, and a
// pod's cgroup is emptied before it is removed), but a test that then
// asserts restartCount 0 and that nothing is left would fail on the
// runtime's bug. reapLeakedTasks deletes these tasks, and only these,
// through containerd's own API after the agent is killed and before the
// next one starts.

// criCalls follows, in containerd's log, the StartContainer and
// RunPodSandbox calls its CRI serves: it logs "StartContainer for <id>"
// when one begins and "... failed" or "... returns ..." when it ends (at
// info level), whether or not the caller is still there.
type criCalls struct {
	path string
	from int64 // the log's size when following began
}

// followCRICalls follows the calls from here on.
func followCRICalls(t *testing.T, c *containerdtest.Containerd) *criCalls {
	t.Helper()
	fi, err := os.Stat(c.Log)
	if err != nil {
		t.Fatal(err)
	}
	return &criCalls{path: c.Log, from: fi.Size()}
}

// inFlight returns the calls begun and not yet ended, sorted, and how many
// lines telling of a call it read.
func (l *criCalls) inFlight() (open []string, seen int, err error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if _, err := f.Seek(l.from, io.SeekStart); err != nil {
		return nil, 0, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, 0, err
	}
	// A last line without its newline is still being written.
	data = data[:strings.LastIndexByte(string(data), '\n')+1]
	begun := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		call, begins, ok := criCall(line)
		switch {
		case !ok:
			continue
		case begins:
			begun[call]++
		default:
			begun[call]--
		}
		seen++
	}
	for _, call := range slices.Sorted(maps.Keys(begun)) {
		if begun[call] > 0 {
			open = append(open, call)
		}
	}
	return open, seen, nil
}

// criCall parses a line of containerd's log that tells of a StartContainer
// or RunPodSandbox call beginning or ending.
func criCall(line string) (call string, begins, ok bool) {
	i := strings.Index(line, ` msg="`)
	if i < 0 {
		return "", false, false
	}
	quoted, err := strconv.QuotedPrefix(line[i+len(" msg="):])
	if err != nil {
		return "", false, false
	}
	msg, err := strconv.Unquote(quoted)
	if err != nil {
		return "", false, false
	}
	if id, found := strings.CutPrefix(msg, "StartContainer for "); found {
		for _, end := range []string{" failed", " returns successfully"} {
			if id, found := strings.CutSuffix(id, end); found {
				return "StartContainer " + id, false, true
			}
		}
		return "StartContainer " + id, true, true
	}
	if meta, found := strings.CutPrefix(msg, "RunPodSandbox for "); found {
		if meta, found := strings.CutSuffix(meta, " failed, error"); found {
			return "RunPodSandbox " + meta, false, true
		}
		if i := strings.Index(meta, " returns sandbox id "); i >= 0 {
			return "RunPodSandbox " + meta[:i], false, true
		}
		return "RunPodSandbox " + meta, true, true
	}
	return "", false, false
}

// ctrTasks returns containerd's tasks in the CRI's namespace: ID → status
// (CREATED, RUNNING, STOPPED, ...).
func ctrTasks(ctx context.Context, c *containerdtest.Containerd) (map[string]string, error) {
	out, err := c.Ctr(ctx, "tasks", "list")
	if err != nil {
		return nil, err
	}
	tasks := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] != "TASK" {
			tasks[f[0]] = f[2]
		}
	}
	return tasks, nil
}

// criObject is a sandbox or container as the CRI reports it.
type criObject struct {
	sandbox bool
	pod     string // io.kubernetes.pod.name
	name    string // a container's name
	state   string // SANDBOX_* or CONTAINER_*
	reason  string // an exited container's, when its task is created
	started bool   // an exited container's, when its task is created: it has a start time
}

func (o criObject) String() string {
	if o.sandbox {
		return fmt.Sprintf("sandbox of pod %s, %s", o.pod, o.state)
	}
	if o.state == runtimeapi.ContainerState_CONTAINER_EXITED.String() {
		return fmt.Sprintf("container %s of pod %s, %s (reason %q, started %v)", o.name, o.pod, o.state, o.reason, o.started)
	}
	return fmt.Sprintf("container %s of pod %s, %s", o.name, o.pod, o.state)
}

// criObjects returns the runtime's sandboxes and containers by ID, with the
// status of each exited container whose task is created.
func criObjects(ctx context.Context, rt *remote.Client, tasks map[string]string) (map[string]criObject, error) {
	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, err
	}
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]criObject{}
	for _, sb := range sbs {
		out[sb.Id] = criObject{sandbox: true, pod: sb.Labels["io.kubernetes.pod.name"], state: sb.State.String()}
	}
	for _, c := range cs {
		o := criObject{pod: c.Labels["io.kubernetes.pod.name"], name: c.Metadata.GetName(), state: c.State.String()}
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED && tasks[c.Id] == "CREATED" {
			st, err := rt.ContainerStatus(ctx, c.Id, false)
			if err != nil {
				return nil, err
			}
			o.reason, o.started = st.GetStatus().GetReason(), st.GetStatus().GetStartedAt() != 0
		}
		out[c.Id] = o
	}
	return out, nil
}

// leaked reports whether a task with that status, of the CRI object o (if
// known), is one containerd/containerd#11037 leaves: created and never
// started, of a container that failed to start or of a sandbox not ready.
// Neither is a state a call in flight passes through: the CRI reports a
// container created until its start has returned, and a sandbox only
// once RunPodSandbox is done with it.
func leaked(status string, o criObject, known bool) bool {
	if status != "CREATED" || !known {
		return false
	}
	if o.sandbox {
		return o.state == runtimeapi.PodSandboxState_SANDBOX_NOTREADY.String()
	}
	return o.state == runtimeapi.ContainerState_CONTAINER_EXITED.String() && o.reason == "StartError" && !o.started
}

// reapLeakedTasks, on either containerd, waits until no StartContainer or
// RunPodSandbox call of a killed agent is in flight (containerd carries on
// with a call whose caller went away, for over a minute under load, and
// one past the task's creation may yet leak it), then deletes the tasks
// such calls leaked, logging each, and fails t at once if a task that
// never started is still there. calls must follow the log from before that
// agent started.
//
// It cannot see a call that containerd had received from the agent but not
// yet logged when it found none in flight: the agent is dead by then, and
// its last request would have had to wait unread in containerd's socket
// through the first look (a ctr run and several CRI calls). A task leaked
// by such a call would show after the next agent started: a container's as
// the pod's container at restartCount 1 (the agent logs that the runtime
// keeps the one cut short), a sandbox's as a mount left after the pods
// are gone.
func reapLeakedTasks(ctx context.Context, t *testing.T, c *containerdtest.Containerd, rt *remote.Client, calls *criCalls) {
	t.Helper()
	begin := time.Now()
	var tasks map[string]string
	var objs map[string]criObject
	first := true
	testenv.EventuallyErr(t, 2*time.Minute, 200*time.Millisecond, "no StartContainer or RunPodSandbox of the killed agent in flight", func() (bool, error) {
		pending, seen, err := calls.inFlight()
		if err != nil {
			return false, err
		}
		if seen == 0 {
			t.Fatalf("containerd's log tells of no StartContainer or RunPodSandbox call since the agent started: which are in flight cannot be told")
		}
		if tasks, err = ctrTasks(ctx, c); err != nil {
			return false, err
		}
		if objs, err = criObjects(ctx, rt, tasks); err != nil {
			return false, err
		}
		// A start past its task's creation (the log tells it too).
		for id, status := range tasks {
			if o, ok := objs[id]; ok && status == "CREATED" && o.state == runtimeapi.ContainerState_CONTAINER_CREATED.String() {
				pending = append(pending, "the start of "+o.String())
			}
		}
		if first && len(pending) > 0 {
			t.Logf("waiting for %d calls of the killed agent in flight: %s", len(pending), strings.Join(pending, "; "))
		}
		first = false
		if len(pending) > 0 {
			return false, fmt.Errorf("in flight: %s", strings.Join(pending, "; "))
		}
		return true, nil
	})
	reaped := 0
	for _, id := range slices.Sorted(maps.Keys(tasks)) {
		o, known := objs[id]
		if !leaked(tasks[id], o, known) {
			continue
		}
		// containerd/containerd#11037: no CRI call deletes this task,
		// and while it is there the container cannot be removed, or the
		// sandbox's process and mount stay after it is.
		if _, err := c.Ctr(ctx, "tasks", "delete", "--force", id); err != nil {
			t.Fatalf("deleting task %s of %v, leaked by containerd (containerd/containerd#11037): %v", id, o, err)
		}
		reaped++
		t.Logf("deleted task %s of %v: created and never started, leaked by containerd when the call was cut short (containerd/containerd#11037)", id, o)
	}
	tasks, err := ctrTasks(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if objs, err = criObjects(ctx, rt, tasks); err != nil {
		t.Fatal(err)
	}
	for _, id := range slices.Sorted(maps.Keys(tasks)) {
		if tasks[id] == "CREATED" {
			what := "nothing the CRI reports"
			if o, ok := objs[id]; ok {
				what = o.String()
			}
			t.Fatalf("containerd holds task %s, created and never started, of %s, with no call in flight and after the reaping of those it leaks (containerd/containerd#11037); its tasks:%s",
				id, what, describeTasks(tasks, objs))
		}
	}
	t.Logf("no call of the killed agent in flight after %v of waiting; %d leaked tasks deleted", time.Since(begin).Round(time.Millisecond), reaped)
}

// describeTasks prints tasks with what the CRI reports of each, for a
// failure message.
func describeTasks(tasks map[string]string, objs map[string]criObject) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(tasks)) {
		what := "not in the CRI"
		if o, ok := objs[id]; ok {
			what = o.String()
		}
		fmt.Fprintf(&b, "\n  %s %s: %s", id, tasks[id], what)
	}
	return b.String()
}

// criCall reads containerd's log lines as 1.6 and v2.4.2 write them.
func TestCRICallLogLines(t *testing.T) {
	for _, tc := range []struct {
		line, call string
		begins, ok bool
	}{
		{`time="2026-12-01T23:49:26.730277744Z" level=info msg="RunPodSandbox for name:\"fmt\" uid:\"uid-fmt\" namespace:\"default\""`,
			`RunPodSandbox name:"fmt" uid:"uid-fmt" namespace:"default"`, true, true},
		{`time="2026-12-01T23:49:27.737985688Z" level=info msg="RunPodSandbox for name:\"fmt\" uid:\"uid-fmt\" namespace:\"default\" returns sandbox id \"ab1c0a7b\""`,
			`RunPodSandbox name:"fmt" uid:"uid-fmt" namespace:"default"`, false, true},
		{`time="2026-12-01T23:49:27.787923574Z" level=error msg="RunPodSandbox for name:\"fmt2\" uid:\"uid-fmt2\" namespace:\"default\" failed, error" error="rpc error: code = Canceled"`,
			`RunPodSandbox name:"fmt2" uid:"uid-fmt2" namespace:"default"`, false, true},
		{`time="2026-12-01T23:49:27.744704954Z" level=info msg="StartContainer for \"15127cdb\""`, `StartContainer "15127cdb"`, true, true},
		{`time="2026-12-01T23:49:27.787501077Z" level=error msg="StartContainer for \"15127cdb\" failed" error="rpc error: code = Unknown desc = failed to create containerd task: failed to get task pid: context canceled"`,
			`StartContainer "15127cdb"`, false, true},
		{`time="2026-12-01T23:49:28.1Z" level=info msg="StartContainer for \"15127cdb\" returns successfully"`, `StartContainer "15127cdb"`, false, true},
		{`time="2026-12-01T23:49:28.2Z" level=info msg="CreateContainer within sandbox \"ab1c0a7b\""`, "", false, false},
		{`time="2026-12-01T23:49:28.3Z" level=info msg="StartContainer for \"15127c`, "", false, false},
	} {
		call, begins, ok := criCall(tc.line)
		if call != tc.call || begins != tc.begins || ok != tc.ok {
			t.Errorf("criCall(%s) = %q, %v, %v; want %q, %v, %v", tc.line, call, begins, ok, tc.call, tc.begins, tc.ok)
		}
	}
}
