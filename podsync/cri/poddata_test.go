package cri

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// The hosts file of a pod-network pod, as the kubelet writes it: the
// managed entries, the pod IP with its FQDN and hostname, then hostAliases.
// A container that mounts its own /etc/hosts does not get it.
func TestHostsFile(t *testing.T) {
	dir := t.TempDir()
	b := &builder{podRoot: dir, clusterDomain: "cluster.local"}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.HostNetwork = false
	pod.Spec.Hostname, pod.Spec.Subdomain = "db-0", "db"
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo.local", "bar.local"}}}
	c := &pod.Spec.Containers[0]
	cfg, err := b.containerConfig(pod, c, 0, podIPs{pod: []string{"10.244.0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	var hosts string
	for _, m := range cfg.Mounts {
		if m.ContainerPath == "/etc/hosts" {
			hosts = m.HostPath
		}
	}
	if hosts != filepath.Join(dir, "uid-1", "etc-hosts") {
		t.Fatalf("no /etc/hosts mount from the pod directory: %v", cfg.Mounts)
	}
	got, err := os.ReadFile(hosts)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
		"10.244.0.5\tdb-0.db.default.svc.cluster.local\tdb-0\n" +
		"\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
	if string(got) != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", got, want)
	}

	// No pod IP yet on the pod network: no hosts file.
	cfg, err = b.containerConfig(pod, c, 0, podIPs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cfg.Mounts {
		if m.ContainerPath == "/etc/hosts" {
			t.Errorf("hosts file mounted without a pod IP")
		}
	}
	// The container mounts its own /etc/hosts (a subPath: a bind mount).
	needMounts(t)
	t.Cleanup(func() {
		if err := cleanSubPaths(b.podDir(pod)); err != nil {
			t.Error(err)
		}
	})
	pod.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "h", MountPath: "/etc/hosts", SubPath: "hosts"}}
	cfg, err = b.containerConfig(pod, c, 0, podIPs{pod: []string{"10.244.0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(cfg.String(), "/etc/hosts"); n != 1 {
		t.Errorf("/etc/hosts mounted %d times: %v", n, cfg.Mounts)
	}
}

// stubData is a PodData with fixed answers, to check how the builder
// combines them with the container's own env.
type stubData struct {
	from, services []corev1.EnvVar
	values         map[string]string // by ConfigMap key; missing: optional, left out
	err            error
	auths          []*runtimeapi.AuthConfig
}

func (s *stubData) SetUpPod(context.Context, *corev1.Pod, string) error    { return nil }
func (s *stubData) TearDownPod(context.Context, *corev1.Pod, string) error { return nil }
func (s *stubData) VolumePath(_ *corev1.Pod, dir string, v *corev1.Volume) (string, bool) {
	if v.Secret != nil {
		return filepath.Join(dir, "volumes", "kubernetes.io~secret", v.Name), true
	}
	return "", false
}
func (s *stubData) EnvFrom(context.Context, *corev1.Pod, *corev1.Container) ([]corev1.EnvVar, []corev1.EnvVar, error) {
	return s.from, s.services, s.err
}
func (s *stubData) EnvValue(_ context.Context, _ *corev1.Pod, _ *corev1.Container, src *corev1.EnvVarSource) (string, bool, error) {
	v, ok := s.values[src.ConfigMapKeyRef.Key]
	return v, ok, nil
}
func (s *stubData) PullAuth(*corev1.Pod, string) []*runtimeapi.AuthConfig { return s.auths }

// Pull credentials are tried in turn until one pulls, as the kubelet tries
// them; with none the image is pulled without.
func TestPullTriesEachCredential(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	data := &stubData{auths: []*runtimeapi.AuthConfig{{Username: "team"}, {Username: "any"}}}
	var err error
	if h.Syncer, err = New(Options{Runtime: h.RT, Clock: h.Clock, PodLogRoot: dir, PodRoot: dir, ResolvConf: "-", PodData: data}); err != nil {
		t.Fatal(err)
	}
	if h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock}); err != nil {
		t.Fatal(err)
	}
	fail := runtimetest.Errors(status.Error(codes.Unauthenticated, "denied for team"))
	h.RT.SetHooks(runtimetest.Hooks{PullImage: func(context.Context, *runtimeapi.ImageSpec, *runtimeapi.AuthConfig, *runtimeapi.PodSandboxConfig) error {
		return fail()
	}})
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].Image = "registry.example.com/team/app:1"
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	h.Add(pod)
	pulls := 0
	for _, c := range h.RT.Calls() {
		if c.Method == "PullImage" {
			pulls++
		}
	}
	if pulls != 2 {
		t.Errorf("%d pulls, want the first credential refused and the second used", pulls)
	}
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 1 {
		t.Errorf("%d running after the second credential pulled", n)
	}
}

// The env as the kubelet builds it: envFrom, then env overriding it in
// order with $(VAR) seeing envFrom, earlier env and service variables,
// then the service variables the container does not set. Secret volumes
// are mounted read-only whatever the mount says.
func TestEnvWithPodData(t *testing.T) {
	b := &builder{podRoot: t.TempDir(), data: &stubData{
		from:     []corev1.EnvVar{{Name: "A", Value: "from"}, {Name: "B", Value: "b"}},
		services: []corev1.EnvVar{{Name: "SVC_HOST", Value: "10.0.0.1"}, {Name: "B", Value: "svc-b"}},
		values:   map[string]string{"k": "cm"},
	}}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/s"}}
	cmRef := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: key}}
	}
	c.Env = []corev1.EnvVar{
		{Name: "A", Value: "own-$(B)"},
		{Name: "C", ValueFrom: cmRef("k")},
		{Name: "D", ValueFrom: cmRef("absent")},
		{Name: "E", Value: "$(C)@$(SVC_HOST)"},
	}
	cfg, err := b.containerConfig(pod, c, 0, podIPs{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range cfg.Envs {
		got = append(got, kv.Key+"="+string(kv.Value))
	}
	if want := "A=own-b B=b C=cm E=cm@10.0.0.1 SVC_HOST=10.0.0.1"; strings.Join(got, " ") != want {
		t.Errorf("env %v, want %s", got, want)
	}
	if m := cfg.Mounts[0]; m.ContainerPath != "/s" || !m.Readonly || !strings.HasSuffix(m.HostPath, "uid-1/volumes/kubernetes.io~secret/s") {
		t.Errorf("secret mount %v", m)
	}
	b.data.(*stubData).err = errors.New(`configmap "x" not found`)
	if _, err := b.containerConfig(pod, c, 0, podIPs{}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `configmap "x" not found`) {
		t.Errorf("EnvFrom error: %v", err)
	}
}
