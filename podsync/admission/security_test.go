package admission

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func sysctlPod(names ...string) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{}}}
	for _, n := range names {
		pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
	}
	return pod
}

func TestSafeSysctlsByKernel(t *testing.T) {
	old, cur := SafeSysctls("3.10.0-1160.el7.x86_64"), SafeSysctls("6.1.0-13-amd64")
	if len(old) != 5 || len(cur) != len(safeSysctls) {
		t.Errorf("3.10: %v; 6.1: %v", old, cur)
	}
	if slices.Contains(SafeSysctls("4.5.0"), "net.ipv4.tcp_fin_timeout") || !slices.Contains(SafeSysctls("4.6.0"), "net.ipv4.tcp_fin_timeout") {
		t.Error("tcp_fin_timeout is safe from 4.6")
	}
	if got := SafeSysctls(""); len(got) != 5 {
		t.Errorf("unknown kernel: %v", got)
	}
}

func TestSysctlsAdmission(t *testing.T) {
	s, err := NewSysctls(SysctlOptions{KernelVersion: "6.1.0", AllowedUnsafeSysctls: []string{"kernel.msg*", "net.core.somaxconn"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		message string // "" admitted
	}{
		{"none", &corev1.Pod{}, ""},
		{"safe", sysctlPod("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range"), ""},
		{"safe with slashes", sysctlPod("net/ipv4/ip_local_port_range"), ""},
		{"allowed unsafe", sysctlPod("net.core.somaxconn", "kernel.msgmax"), ""},
		{"unsafe", sysctlPod("kernel.shm_rmid_forced", "vm.swappiness"), `forbidden sysctl: "vm.swappiness" not allowlisted`},
		{"net with host network", func() *corev1.Pod {
			p := sysctlPod("net.ipv4.ip_local_port_range")
			p.Spec.HostNetwork = true
			return p
		}(), `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{"ipc with host IPC", func() *corev1.Pod {
			p := sysctlPod("kernel.msgmax")
			p.Spec.HostIPC = true
			return p
		}(), `forbidden sysctl: "kernel.msgmax" not allowed with host IPC enabled`},
	} {
		r := s.Admit(tc.pod, nil)
		if tc.message == "" {
			if !r.Admit {
				t.Errorf("%s: rejected: %+v", tc.name, r)
			}
			continue
		}
		if r.Admit || r.Reason != ReasonSysctlForbidden || r.Message != tc.message {
			t.Errorf("%s: %+v, want %s", tc.name, r, tc.message)
		}
	}
	for _, bad := range []string{"vm.swappiness", "foo*", " kernel.msg*", "net.-"} {
		if _, err := NewSysctls(SysctlOptions{AllowedUnsafeSysctls: []string{bad}}); err == nil {
			t.Errorf("%q accepted as an allowed unsafe sysctl", bad)
		}
	}
}

func TestAppArmorAdmission(t *testing.T) {
	app := func(mut func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		mut(p)
		return p
	}
	runtimeDefault := &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	field := app(func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: runtimeDefault}
	})
	annotated := app(func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "localhost/k8s-nginx"}
	})
	unconfined := app(func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "unconfined"}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
	})
	empty := app(func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: new(" ")}}
	})
	without, with := AppArmor{}, AppArmor{Enabled: true}
	for _, p := range []*corev1.Pod{field, annotated} {
		r := without.Admit(p, nil)
		if r.Admit || r.Reason != ReasonAppArmor || r.Message != "Cannot enforce AppArmor: AppArmor is not enabled on the host" {
			t.Errorf("no AppArmor: %+v", r)
		}
		if r := with.Admit(p, nil); !r.Admit {
			t.Errorf("AppArmor: %+v", r)
		}
	}
	if r := without.Admit(unconfined, nil); !r.Admit {
		t.Errorf("unconfined: %+v", r)
	}
	if r := with.Admit(empty, nil); r.Admit || r.Reason != ReasonAppArmor {
		t.Errorf("empty localhost name: %+v", r)
	}
	running := field.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	if r := without.Admit(running, nil); !r.Admit {
		t.Errorf("a running pod is not checked again: %+v", r)
	}
	if p := AppArmorProfile(annotated, &annotated.Spec.Containers[0]); p == nil || p.Type != corev1.AppArmorProfileTypeLocalhost || *p.LocalhostProfile != "k8s-nginx" {
		t.Errorf("annotation profile %+v", p)
	}
}

func TestSupplementalGroupsPolicyStrict(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}
	preds, err := New(Options{Node: func() (*corev1.Node, error) { return node, nil }, OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SupplementalGroupsPolicy: new(corev1.SupplementalGroupsPolicyStrict)}}}
	r := preds.Admit(pod, nil)
	if r.Admit || r.Reason != ReasonSupplementalGroupsPolicyNotSupported || r.Message != "SupplementalGroupsPolicy=Strict is not supported in this node" {
		t.Errorf("without the feature: %+v", r)
	}
	node.Status.Features = &corev1.NodeFeatures{SupplementalGroupsPolicy: new(true)}
	if r := preds.Admit(pod, nil); !r.Admit {
		t.Errorf("with the feature: %+v", r)
	}
	merge := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SupplementalGroupsPolicy: new(corev1.SupplementalGroupsPolicyMerge)}}}
	node.Status.Features = nil
	if r := preds.Admit(merge, nil); !r.Admit {
		t.Errorf("Merge: %+v", r)
	}
}
