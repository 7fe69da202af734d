package volume

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/internal/testenv"
)

func service(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func envString(vars []corev1.EnvVar) string {
	var b strings.Builder
	for _, v := range vars {
		b.WriteString(v.Name + "=" + v.Value + "\n")
	}
	return b.String()
}

// envFrom: ConfigMaps and Secrets in order, a later one overriding, keys
// sorted, the prefix applied, optional missing sources skipped, a missing
// required one an error.
func TestEnvFrom(t *testing.T) {
	f := newFixture(t, nil, configMap("cm", map[string]string{"B": "1", "A": "2"}), secret("sec", map[string]string{"A": "s", "C": "3"}))
	pod := newPod("web")
	pod.Spec.EnableServiceLinks = ptr(false)
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
		{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
	}
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	from, _, err := f.m.EnvFrom(context.Background(), pod, c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := envString(from), "A=s\nB=1\nC=3\nP_A=2\nP_B=1\n"; got != want {
		t.Errorf("envFrom:\n%s\nwant:\n%s", got, want)
	}
	c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "required"}}})
	if err := f.setUp(pod); err != nil {
		t.Fatal(err) // env is not a volume: set-up succeeds, the container waits
	}
	if _, _, err := f.m.EnvFrom(context.Background(), pod, c); err == nil || !strings.Contains(err.Error(), `secret "required" not found`) {
		t.Errorf("missing required envFrom: %v", err)
	}
}

// configMapKeyRef, secretKeyRef (optional or not) and resourceFieldRef
// with divisors, another container's resources, and the node's allocatable
// for an unset limit.
func TestEnvValue(t *testing.T) {
	f := newFixture(t, &Options{Allocatable: func() corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	}}, configMap("cm", map[string]string{"k": "cv"}), secret("sec", map[string]string{"k": "sv"}))
	pod := newPod("web")
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}})
	c := &pod.Spec.Containers[0]
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		src  corev1.EnvVarSource
		want string
		ok   bool
		err  string
	}{
		{"cm", corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}, "cv", true, ""},
		{"secret", corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "k"}}, "sv", true, ""},
		{"missing key", corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "x"}}, "", false, "couldn't find key x in Secret ns/sec"},
		{"optional key", corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "x", Optional: ptr(true)}}, "", false, ""},
		{"optional object", corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "none"}, Key: "x", Optional: ptr(true)}}, "", false, ""},
		{"missing object", corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "none"}, Key: "x"}}, "", false, `configmap "none" not found`},
		{"requests.cpu in m", corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}, "250", true, ""},
		{"requests.cpu rounded up", corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu"}}, "1", true, ""},
		{"limits.cpu from allocatable", corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}, "4", true, ""},
		{"limits.memory from allocatable in Mi", corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}, "2048", true, ""},
		{"other container", corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "side", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}, "64", true, ""},
		{"bad resource", corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}, "", false, "unsupported container resource"},
	} {
		got, ok, err := f.m.EnvValue(ctx, pod, c, &tc.src)
		if got != tc.want || ok != tc.ok || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %q %v %v, want %q %v %q", tc.name, got, ok, err, tc.want, tc.ok, tc.err)
		}
	}
}

// Service variables: the namespace's services with a cluster IP when
// enableServiceLinks is not false, and default/kubernetes always; named
// ports and the Docker link variables.
func TestServiceEnv(t *testing.T) {
	f := newFixture(t, nil,
		service("default", "kubernetes", "10.0.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}),
		service("ns", "redis-primary", "10.0.0.11", corev1.ServicePort{Port: 6379}, corev1.ServicePort{Name: "metrics", Port: 9121, Protocol: corev1.ProtocolUDP}),
		service("ns", "headless", corev1.ClusterIPNone, corev1.ServicePort{Port: 80}),
		service("other", "elsewhere", "10.0.0.12", corev1.ServicePort{Port: 80}))
	pod := newPod("web")
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "services listed", f.m.services.HasSynced)
	_, svc, err := f.m.EnvFrom(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "KUBERNETES_SERVICE_HOST=10.0.0.1\nKUBERNETES_SERVICE_PORT=443\nKUBERNETES_SERVICE_PORT_HTTPS=443\n" +
		"KUBERNETES_PORT=tcp://10.0.0.1:443\nKUBERNETES_PORT_443_TCP=tcp://10.0.0.1:443\nKUBERNETES_PORT_443_TCP_PROTO=tcp\nKUBERNETES_PORT_443_TCP_PORT=443\nKUBERNETES_PORT_443_TCP_ADDR=10.0.0.1\n" +
		"REDIS_PRIMARY_SERVICE_HOST=10.0.0.11\nREDIS_PRIMARY_SERVICE_PORT=6379\nREDIS_PRIMARY_SERVICE_PORT_METRICS=9121\n" +
		"REDIS_PRIMARY_PORT=tcp://10.0.0.11:6379\nREDIS_PRIMARY_PORT_6379_TCP=tcp://10.0.0.11:6379\nREDIS_PRIMARY_PORT_6379_TCP_PROTO=tcp\nREDIS_PRIMARY_PORT_6379_TCP_PORT=6379\nREDIS_PRIMARY_PORT_6379_TCP_ADDR=10.0.0.11\n" +
		"REDIS_PRIMARY_PORT_9121_UDP=udp://10.0.0.11:9121\nREDIS_PRIMARY_PORT_9121_UDP_PROTO=udp\nREDIS_PRIMARY_PORT_9121_UDP_PORT=9121\nREDIS_PRIMARY_PORT_9121_UDP_ADDR=10.0.0.11\n"
	if got := envString(svc); got != want {
		t.Errorf("service env:\n%s\nwant:\n%s", got, want)
	}
	pod.Spec.EnableServiceLinks = ptr(false)
	_, svc, _ = f.m.EnvFrom(context.Background(), pod, &pod.Spec.Containers[0])
	if got := envString(svc); !strings.HasPrefix(got, "KUBERNETES_SERVICE_HOST=") || strings.Contains(got, "REDIS") {
		t.Errorf("enableServiceLinks false:\n%s", got)
	}
	if got := envString(ServiceEnvVars(service("ns", "v6", "fd00::1", corev1.ServicePort{Port: 80}))); !strings.Contains(got, "V6_PORT=tcp://[fd00::1]:80\n") {
		t.Errorf("IPv6 service:\n%s", got)
	}
}

// Without a successful list of services, non-static pods wait
// (CreateContainerConfigError), as the kubelet makes them.
func TestServiceEnvNotSynced(t *testing.T) {
	m, err := New(withAPI(Options{SyncTimeout: time.Millisecond}, newFixtureClient()))
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod("web")
	if _, _, err := m.EnvFrom(context.Background(), pod, &pod.Spec.Containers[0]); err == nil || !strings.Contains(err.Error(), "services have not yet been read") {
		t.Errorf("EnvFrom before services were listed: %v", err)
	}
	if _, _, err := m.EnvValue(context.Background(), pod, &pod.Spec.Containers[0], &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}); !errors.Is(err, ErrNotSynced) {
		t.Errorf("EnvValue while not running: %v", err)
	}
}
