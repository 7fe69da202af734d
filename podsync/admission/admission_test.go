package admission_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/admission"
)

func testNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/os": "linux", "zone": "a"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("2"),
			corev1.ResourceMemory:           resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
			corev1.ResourcePods:             resource.MustParse("3"),
			"example.com/gpu":               resource.MustParse("1"),
		}},
	}
}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{podsource.ConfigSourceAnnotation: podsource.APISource}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func requests(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		p.Spec.Containers[0].Resources.Requests = l
	}
}

func hostPort(ip string, port int32, proto corev1.Protocol) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 80, HostPort: port, HostIP: ip, Protocol: proto})
	}
}

func noToleration(p *corev1.Pod) { p.Spec.Tolerations = nil }

func static(p *corev1.Pod) { p.Annotations[podsource.ConfigSourceAnnotation] = podsource.FileSource }

func TestPredicates(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name    string
		pod     *corev1.Pod
		active  []*corev1.Pod
		node    func() (*corev1.Node, error)
		reason  string
		message string
	}{
		{name: "fits", pod: pod("a", requests("cpu", "1", "memory", "512Mi")), active: []*corev1.Pod{pod("b", requests("cpu", "1"))}},
		{name: "best effort on a full-resource node", pod: pod("a"), active: []*corev1.Pod{pod("b", requests("cpu", "2", "memory", "1Gi"))}},
		{name: "too many pods", pod: pod("a"), active: []*corev1.Pod{pod("b"), pod("c"), pod("d")},
			reason: "OutOfpods", message: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"},
		{name: "pods first, then cpu", pod: pod("a", requests("cpu", "3")), active: []*corev1.Pod{pod("b"), pod("c"), pod("d")},
			reason: "OutOfpods", message: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"},
		{name: "cpu in millicores", pod: pod("a", requests("cpu", "1500m")), active: []*corev1.Pod{pod("b", requests("cpu", "600m"))},
			reason: "OutOfcpu", message: "Node didn't have enough resource: cpu, requested: 1500, used: 600, capacity: 2000"},
		{name: "memory in bytes", pod: pod("a", requests("memory", "1Gi")), active: []*corev1.Pod{pod("b", requests("memory", "1"))},
			reason: "OutOfmemory", message: "Node didn't have enough resource: memory, requested: 1073741824, used: 1, capacity: 1073741824"},
		{name: "cpu before memory", pod: pod("a", requests("cpu", "3", "memory", "2Gi")),
			reason: "OutOfcpu", message: "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"},
		{name: "ephemeral storage", pod: pod("a", requests("ephemeral-storage", "11Gi")),
			reason: "OutOfephemeral-storage", message: "Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240"},
		{name: "extended resource the node has", pod: pod("a", requests("example.com/gpu", "2")),
			reason: "OutOfexample.com/gpu", message: "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1"},
		{name: "extended resource the node does not list is not checked", pod: pod("a", requests("example.com/fpga", "2"))},
		{name: "init container's larger request counts", pod: func() *corev1.Pod {
			p := pod("a")
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("2500m")}}}}
			return p
		}(), reason: "OutOfcpu", message: "Node didn't have enough resource: cpu, requested: 2500, used: 0, capacity: 2000"},
		{name: "overhead counts", pod: pod("a", requests("cpu", "1900m"), func(p *corev1.Pod) { p.Spec.Overhead = corev1.ResourceList{"cpu": resource.MustParse("200m")} }),
			reason: "OutOfcpu", message: "Node didn't have enough resource: cpu, requested: 2100, used: 0, capacity: 2000"},
		{name: "node selector matches", pod: pod("a", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} })},
		{name: "node selector does not match", pod: pod("a", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			reason: "NodeAffinity", message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "required node affinity does not match", pod: pod("a", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b", "c"}}}}},
			}}}
		}), reason: "NodeAffinity", message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "another node's pod", pod: pod("a", func(p *corev1.Pod) { p.Spec.NodeName = "n2" }),
			reason: "NodeName", message: "Predicate NodeName failed: node(s) didn't match the requested node name"},
		{name: "host port taken on the wildcard", pod: pod("a", hostPort("", 8080, "")), active: []*corev1.Pod{pod("b", hostPort("10.0.0.1", 8080, corev1.ProtocolTCP))},
			reason: "NodePorts", message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{name: "host port taken by a sidecar", pod: pod("a", hostPort("", 8080, "")), active: []*corev1.Pod{pod("b", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 8080}}}}
		})}, reason: "NodePorts", message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{name: "same host port, other protocol", pod: pod("a", hostPort("", 8080, corev1.ProtocolUDP)), active: []*corev1.Pod{pod("b", hostPort("", 8080, ""))}},
		{name: "same host port, other IPs", pod: pod("a", hostPort("10.0.0.2", 8080, "")), active: []*corev1.Pod{pod("b", hostPort("10.0.0.1", 8080, ""))}},
		{name: "untolerated NoExecute taint", pod: pod("a", noToleration),
			reason: "TaintToleration", message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"},
		{name: "static pods are not checked against taints", pod: pod("a", noToleration, static)},
		{name: "NoSchedule taints are the scheduler's", pod: pod("a", noToleration), node: func() (*corev1.Node, error) {
			n := testNode()
			n.Spec.Taints[0].Effect = corev1.TaintEffectNoSchedule
			return n, nil
		}},
		{name: "OS field", pod: pod("a", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }),
			reason: "PodOSNotSupported", message: "Failed to admit pod as the OS field doesn't match node OS"},
		{name: "OS label before resources", pod: pod("a", requests("cpu", "9"), func(p *corev1.Pod) { p.Labels = map[string]string{"kubernetes.io/os": "windows"} }),
			reason: "PodOSSelectorNodeLabelDoesNotMatch", message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{name: "no node", pod: pod("a"), node: func() (*corev1.Node, error) { return nil, errors.New("not registered") },
			reason: "InvalidNodeInfo", message: "Kubelet cannot get node info."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = func() (*corev1.Node, error) { return testNode(), nil }
			}
			p, err := admission.New(admission.Options{Node: node, OS: "linux"})
			if err != nil {
				t.Fatal(err)
			}
			got := p.Admit(tc.pod, tc.active)
			want := admission.Result{Admit: tc.reason == "", Reason: tc.reason, Message: tc.message}
			if got.Admit != want.Admit || got.Reason != want.Reason || got.Message != want.Message || got.Preempt != nil {
				t.Errorf("Admit = %+v, want %+v", got, want)
			}
		})
	}
}

func TestNewNeedsNode(t *testing.T) {
	_, err := admission.New(admission.Options{})
	if err == nil || err.Error() != "admission: Options.Node is required" {
		t.Fatalf("err = %v", err)
	}
}

func TestResultStatus(t *testing.T) {
	s := admission.Result{Reason: "OutOfpods", Message: "m"}.Status(corev1.PodQOSBestEffort)
	if s.Phase != corev1.PodFailed || s.Reason != "OutOfpods" || s.Message != "Pod was rejected: m" || s.QOSClass != corev1.PodQOSBestEffort {
		t.Fatalf("status = %+v", s)
	}
}

// The active pods' requests are summed from the objects passed in: a new
// object of the same pod (an update) counts with its own requests.
func TestPredicatesRequestsFollowThePodObject(t *testing.T) {
	p, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return testNode(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	a := pod("a", requests("cpu", "1"))
	if r := p.Admit(pod("b", requests("cpu", "1")), []*corev1.Pod{a}); !r.Admit {
		t.Fatalf("b with a of 1 cpu on 2: %+v", r)
	}
	bigger := pod("a", requests("cpu", "1500m"))
	if r := p.Admit(pod("b", requests("cpu", "1")), []*corev1.Pod{bigger}); r.Admit || r.Reason != "OutOfcpu" {
		t.Fatalf("b with a's new object of 1.5 cpu on 2: %+v, want OutOfcpu", r)
	}
}

// BenchmarkPredicatesAdmit admits a pod to a node running 250 (each
// admission against all of them, as the kubelet's).
func BenchmarkPredicatesAdmit(b *testing.B) {
	node := testNode()
	node.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("300")
	node.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("300")
	p, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return node, nil }})
	if err != nil {
		b.Fatal(err)
	}
	var active []*corev1.Pod
	for i := range 250 {
		active = append(active, pod(string(rune('a'+i%26))+string(rune('a'+i/26)), requests("cpu", "100m", "memory", "1Mi")))
	}
	next := pod("new", requests("cpu", "100m"))
	b.ReportAllocs()
	for b.Loop() {
		if r := p.Admit(next, active); !r.Admit {
			b.Fatal(r)
		}
	}
}
