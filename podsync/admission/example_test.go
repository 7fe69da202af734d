package admission_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podsync/admission"
)

// A node with room for two pods admits the first two and rejects the third
// with kubelet's OutOfpods; a pod for another zone is rejected with
// NodeAffinity.
func Example() {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"zone": "north"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("2"),
			corev1.ResourceCPU:  resource.MustParse("4"),
		}},
	}
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return node, nil }, OS: "linux"})
	if err != nil {
		panic(err)
	}
	var active []*corev1.Pod
	for _, name := range []string{"a", "b", "c"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		r := preds.Admit(p, active)
		if r.Admit {
			active = append(active, p)
			fmt.Println(name, "admitted")
			continue
		}
		fmt.Println(name, r.Reason+":", r.Message)
	}
	south := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "south"}}}
	fmt.Println(preds.Admit(south, nil).Status(corev1.PodQOSBestEffort).Message)
	// Output:
	// a admitted
	// b admitted
	// c OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2
	// Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector
}

// A static pod on a node whose two pod slots are taken is admitted by
// preempting a pod: the best-effort one, sparing the one with requests.
func Example_preemption() {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("2"),
			corev1.ResourceCPU:  resource.MustParse("4"),
		}},
	}
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return node, nil }, OS: "linux"})
	if err != nil {
		panic(err)
	}
	busy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	idle := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "idle"}}
	static := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "static-edge-1",
		Annotations: map[string]string{"kubernetes.io/config.source": "file"}}}

	r := preds.Admit(static, []*corev1.Pod{busy, idle})
	fmt.Println(r.Admit, r.Reason)
	for _, v := range r.Preempt {
		s := admission.PreemptedStatus(v)
		fmt.Println(v.Name, s.Phase, s.Reason+":", s.Message)
	}
	// Output:
	// true OutOfpods
	// idle Failed Preempting: Preempted in order to admit critical pod
}

// The kubelet's security admission as a chain: sysctls (safe ones, and
// those the node allows), AppArmor on a host without it, and the fields
// nodekit does not implement, each refusal naming what it refuses.
func Example_security() {
	sysctls, err := admission.NewSysctls(admission.SysctlOptions{KernelVersion: "6.1.0", AllowedUnsafeSysctls: []string{"net.core.somaxconn"}})
	if err != nil {
		panic(err)
	}
	var chain admission.Chain
	chain.Add(sysctls)
	chain.Add(admission.AppArmor{Enabled: false})
	chain.Add(admission.Unsupported{})
	withSysctl := func(name string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: name, Value: "1"}}}}}
	}
	for _, p := range []*corev1.Pod{
		withSysctl("net.ipv4.tcp_syncookies"),
		withSysctl("net.core.somaxconn"),
		withSysctl("vm.swappiness"),
		{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}}},
		{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu"}}}},
	} {
		r := chain.Admit(p, nil)
		if r.Admit {
			fmt.Println("admitted")
			continue
		}
		fmt.Println(r.Reason+":", r.Message)
	}
	// Output:
	// admitted
	// admitted
	// SysctlForbidden: forbidden sysctl: "vm.swappiness" not allowlisted
	// AppArmor: Cannot enforce AppArmor: AppArmor is not enabled on the host
	// PodFeatureUnsupported: spec.resourceClaims is not supported by this node: nodekit does not implement dynamic resource allocation
}
