package cri

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync/admission"
)

func resources(req, lim string) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	if req != "" {
		r.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req), corev1.ResourceMemory: resource.MustParse("100Mi")}
	}
	if lim != "" {
		r.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim), corev1.ResourceMemory: resource.MustParse("100Mi")}
	}
	return r
}

func TestQOSAndCgroups(t *testing.T) {
	cases := []struct {
		req, lim    string
		qos         corev1.PodQOSClass
		fs, systemd string
		shares      int64
		quota       int64
		oom         int64
	}{
		{"", "", corev1.PodQOSBestEffort, "/kubepods/besteffort/poda-b", "kubepods-besteffort-poda_b.slice", 2, 0, 1000},
		{"250m", "", corev1.PodQOSBurstable, "/kubepods/burstable/poda-b", "kubepods-burstable-poda_b.slice", 256, 0, 1000 - 1000*100/1024},
		{"500m", "500m", corev1.PodQOSGuaranteed, "/kubepods/poda-b", "kubepods-poda_b.slice", 512, 50000, -997},
		{"", "1m", corev1.PodQOSGuaranteed, "/kubepods/poda-b", "kubepods-poda_b.slice", 2, 1000, -997},
	}
	for _, tc := range cases {
		pod := testPod(corev1.RestartPolicyAlways, "a")
		pod.UID = "a-b"
		pod.Spec.Containers[0].Resources = resources(tc.req, tc.lim)
		if tc.req == "" && tc.lim != "" {
			pod.Spec.Containers[0].Resources.Requests = pod.Spec.Containers[0].Resources.Limits
		}
		if got := admission.QOSClass(pod); got != tc.qos {
			t.Errorf("%s/%s: QOS %s, want %s", tc.req, tc.lim, got, tc.qos)
		}
		if got := PodCgroupParent(pod, CgroupfsDriver, ""); got != tc.fs {
			t.Errorf("cgroupfs parent %s, want %s", got, tc.fs)
		}
		if got := PodCgroupParent(pod, SystemdDriver, ""); got != tc.systemd {
			t.Errorf("systemd parent %s, want %s", got, tc.systemd)
		}
		r := linuxResources(pod, &pod.Spec.Containers[0], 1024<<20)
		if r.CpuShares != tc.shares || r.CpuQuota != tc.quota || r.OomScoreAdj != tc.oom {
			t.Errorf("%s/%s: shares %d quota %d oom %d, want %d %d %d", tc.req, tc.lim, r.CpuShares, r.CpuQuota, r.OomScoreAdj, tc.shares, tc.quota, tc.oom)
		}
	}
}

func TestDNSConfig(t *testing.T) {
	host := []byte("nameserver 10.1.1.1\nsearch corp.example\noptions edns0\n")
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.HostNetwork = false
	got := dnsConfig(pod, []string{"10.96.0.10"}, "cluster.local", host)
	want := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
		Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterFirst: %v, want %v", got, want)
	}
	pod.Spec.HostNetwork = true
	got = dnsConfig(pod, []string{"10.96.0.10"}, "cluster.local", host)
	if !reflect.DeepEqual(got.Servers, []string{"10.1.1.1"}) || !reflect.DeepEqual(got.Options, []string{"edns0"}) {
		t.Errorf("ClusterFirst on host network should be Default: %v", got)
	}
	pod.Spec.DNSPolicy = corev1.DNSNone
	two := "2"
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}
	got = dnsConfig(pod, nil, "", host)
	if !reflect.DeepEqual(got.Servers, []string{"1.1.1.1"}) || !reflect.DeepEqual(got.Options, []string{"ndots:2"}) || len(got.Searches) != 0 {
		t.Errorf("None: %v", got)
	}
}

func TestHostname(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	if h := podHostname(pod, "cluster.local"); h != "" {
		t.Errorf("host network hostname %q", h)
	}
	pod.Spec.HostNetwork = false
	pod.Name = "a-very-long-name-that-goes-on-and-on-and-on-beyond-sixty-three-c-hars"
	if h := podHostname(pod, ""); len(h) > 63 || h[len(h)-1] == '-' {
		t.Errorf("hostname %q", h)
	}
	yes := true
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = "web-0", "web", &yes
	if h := podHostname(pod, "cluster.local"); h != "web-0.web.default.svc.cluster.local" {
		t.Errorf("FQDN hostname %q", h)
	}
	override := "custom.example"
	pod.Spec.SetHostnameAsFQDN, pod.Spec.HostnameOverride = nil, &override
	if h := podHostname(pod, "cluster.local"); h != override {
		t.Errorf("hostnameOverride: %q", h)
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y"}
	for in, want := range map[string]string{
		"$(A)-$(B)": "x-y", "$$(A)": "$(A)", "$(C)": "$(C)", "a$": "a$", "$(A": "$(A", "plain": "plain", "$x$(B)": "$xy",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContainerConfig(t *testing.T) {
	dir := t.TempDir()
	b := &builder{podLogRoot: "/var/log/pods", podRoot: dir, nodeName: "n1", cgroupDriver: CgroupfsDriver}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	dirType := corev1.HostPathDirectory
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}}},
	}
	c := &pod.Spec.Containers[0]
	c.Command = []string{"echo", "$(GREETING)"}
	c.TerminationMessagePath = "/dev/termination-log"
	c.Env = []corev1.EnvVar{{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "GREETING", Value: "hello $(NAME) on $(NODE)"},
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "host", MountPath: "/host", ReadOnly: true}}
	cfg, err := b.containerConfig(pod, c, 3, podIPs{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Command[1]; got != "hello web on $(NODE)" {
		t.Errorf("command %q", got)
	}
	if cfg.LogPath != "app/3.log" || cfg.Metadata.Attempt != 3 || cfg.Annotations[AnnotationContainerRestartCount] != "3" {
		t.Errorf("log path %s attempt %d annotations %v", cfg.LogPath, cfg.Metadata.Attempt, cfg.Annotations)
	}
	// A host-network pod gets the node's hosts file too, as from the kubelet.
	if len(cfg.Mounts) != 4 || cfg.Mounts[0].HostPath != filepath.Join(dir, "uid-1/volumes/kubernetes.io~empty-dir/scratch") || !cfg.Mounts[1].Readonly ||
		cfg.Mounts[2].ContainerPath != "/etc/hosts" || cfg.Mounts[2].HostPath != filepath.Join(dir, "uid-1/etc-hosts") {
		t.Errorf("mounts %v", cfg.Mounts)
	}
	if _, err := os.Stat(cfg.Mounts[3].HostPath); err != nil {
		t.Errorf("termination message file: %v", err)
	}
	fileType := corev1.HostPathFile
	pod.Spec.Volumes[1].HostPath.Type = &fileType
	if _, err := b.containerConfig(pod, c, 0, podIPs{}); !errors.Is(err, ErrConfig) {
		t.Errorf("hostPath File on a directory: %v", err)
	}
	c.Env = []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{}}}}
	if _, err := b.containerConfig(pod, c, 0, podIPs{}); !errors.Is(err, ErrConfig) {
		t.Errorf("secret env: %v", err)
	}
	sb := b.sandboxConfig(pod, 2)
	if sb.Metadata.Attempt != 2 || sb.Labels[LabelPodUID] != "uid-1" || sb.LogDirectory != "/var/log/pods/default_web_uid-1" ||
		sb.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE || sb.Linux.CgroupParent != "/kubepods/besteffort/poduid-1" {
		t.Errorf("sandbox config %v", sb)
	}
}

// An emptyDir is made 0777 whatever the umask, and with the pod's fsGroup
// gets that group and the set-group-ID bit; an existing one is left alone.
func TestMakeEmptyDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a directory's group to an arbitrary one needs root")
	}
	gid := int64(4321)
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{FSGroup: &gid}}}
	base := t.TempDir()
	plain, grouped := filepath.Join(base, "plain"), filepath.Join(base, "grouped")
	if err := makeEmptyDir(plain, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	if err := makeEmptyDir(grouped, pod); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]os.FileMode{plain: 0o777 | os.ModeDir, grouped: 0o777 | os.ModeDir | os.ModeSetgid} {
		info, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(dir), info.Mode(), want)
		}
	}
	info, _ := os.Stat(grouped)
	if g := info.Sys().(*syscall.Stat_t).Gid; g != uint32(gid) {
		t.Errorf("grouped: group %d, want %d", g, gid)
	}
	if err := os.Chmod(plain, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := makeEmptyDir(plain, pod); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(plain); info.Mode().Perm() != 0o700 {
		t.Errorf("an existing emptyDir was changed to %v", info.Mode())
	}
}
