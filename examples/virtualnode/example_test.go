package virtualnode_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
	"github.com/nodekit/nodekit/podsync"
)

// remote is where the virtual node's pods run: here a map, in a real
// virtual node another system's API. It is the node's podsync.PodSyncer
// and podsync.Relister.
type remote struct {
	mu   sync.Mutex
	pods map[types.UID]*podsync.PodState
}

func (r *remote) SyncPod(_ context.Context, pod *corev1.Pod, observed *podsync.PodState) (podsync.SyncResult, error) {
	if observed != nil {
		return podsync.SyncResult{}, nil // running already
	}
	now := time.Now()
	st := &podsync.PodState{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace,
		Sandboxes: []*podsync.SandboxState{{ID: "sb-" + string(pod.UID), State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: now, IPs: []string{"10.0.0.7"}}}}
	for _, c := range pod.Spec.Containers {
		st.Containers = append(st.Containers, &podsync.ContainerState{ID: string(pod.UID) + "-" + c.Name, SandboxID: st.Sandboxes[0].ID,
			Name: c.Name, Image: c.Image, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: now, StartedAt: now})
	}
	r.mu.Lock()
	r.pods[pod.UID] = st
	r.mu.Unlock()
	return podsync.SyncResult{Changed: true}, nil
}

func (r *remote) SyncTerminatingPod(_ context.Context, pod *corev1.Pod, _ *podsync.PodState, _ time.Duration) error {
	r.mu.Lock()
	delete(r.pods, pod.UID)
	r.mu.Unlock()
	return nil
}

func (r *remote) SyncTerminatedPod(context.Context, *corev1.Pod, *podsync.PodState) error { return nil }

func (r *remote) Relist(context.Context) (map[types.UID]*podsync.PodState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[types.UID]*podsync.PodState, len(r.pods))
	for uid, st := range r.pods {
		out[uid] = st
	}
	return out, nil
}

// A virtual node on client-go's fake clientset: it registers, and the pod
// bound to it runs remotely, its status written back as the kubelet writes it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := heartbeattest.UIDClientset(fake.NewClientset()) // the fake with UIDs, as the API server gives them
	api := &nodekit.API{Nodes: cs.CoreV1().Nodes(), Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace),
		Pods: func(ns string) nodekit.PodClient { return cs.CoreV1().Pods(ns) }}
	backend := &remote{pods: map[types.UID]*podsync.PodState{}}
	pods, err := nodekit.NewPodHalf(nodekit.PodHalfOptions{NodeName: "virtual-1", API: api, HostIPs: []string{"192.0.2.1"},
		Backend: func(podsync.BackendParts) (podsync.Backend, error) { return podsync.Backend{Syncer: backend}, nil }})
	if err != nil {
		panic(err)
	}
	node, err := nodekit.NewNodeHalf(nodekit.NodeHalfOptions{NodeName: "virtual-1", API: api, Pods: pods,
		Status: nodestatus.Options{Host: nodestatustest.NewHost(nodestatustest.Facts("virtual-1")), Runtime: nodestatustest.NewRuntime()}})
	if err != nil {
		panic(err)
	}
	var agent nodekit.Group
	_ = agent.Add("pods", pods)
	_ = agent.Add("node", node)
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()

	w, _ := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	_, _ = cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: corev1.PodSpec{NodeName: "virtual-1", Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}}}, metav1.CreateOptions{})
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case err := <-done:
			fmt.Println("the agent stopped early:", err)
			return
		}
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified && ready(p) {
			fmt.Println(p.Name, p.Status.Phase, "ready, pod IP", p.Status.PodIP, "on host", p.Status.HostIP)
			break
		}
	}
	w.Stop()
	n, _ := cs.CoreV1().Nodes().Get(ctx, "virtual-1", metav1.GetOptions{})
	fmt.Println("node", n.Name, "registered, runtime", n.Status.NodeInfo.ContainerRuntimeVersion)
	cancel()
	fmt.Println("stopped:", <-done)
	// Output:
	// web Running ready, pod IP 10.0.0.7 on host 192.0.2.1
	// node virtual-1 registered, runtime fake://0.1.0
	// stopped: <nil>
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
