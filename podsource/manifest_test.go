package podsource

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const webYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: app
    image: nginx:1.27
    ports:
    - containerPort: 80
  - name: sidecar
    image: busybox
`

var fileOrigin = Origin{Source: FileSource, Location: "/etc/kubernetes/manifests/web.yaml", NodeName: "Node-1"}

func TestDecodeManifestDefaults(t *testing.T) {
	pod, err := DecodeManifest([]byte(webYAML), fileOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "web-node-1" {
		t.Errorf("name %q, want web-node-1 (node name lower-cased)", pod.Name)
	}
	if pod.Namespace != "default" {
		t.Errorf("namespace %q", pod.Namespace)
	}
	if pod.Spec.NodeName != "node-1" {
		t.Errorf("nodeName %q, want node-1 (node name lower-cased)", pod.Spec.NodeName)
	}
	if len(pod.UID) != 32 {
		t.Errorf("UID %q: want 32 hex digits", pod.UID)
	}
	if got := pod.Annotations[ConfigHashAnnotation]; got != string(pod.UID) {
		t.Errorf("config.hash %q, want the UID %q", got, pod.UID)
	}
	if got := pod.Annotations[ConfigSourceAnnotation]; got != FileSource {
		t.Errorf("config.source %q", got)
	}
	if _, ok := pod.Annotations[ConfigSeenAnnotation]; ok {
		t.Errorf("config.seen is the merger's to set")
	}
	want := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0] != want {
		t.Errorf("tolerations %+v, want [%+v]", pod.Spec.Tolerations, want)
	}
	if pod.Status.Phase != v1.PodPending {
		t.Errorf("phase %q", pod.Status.Phase)
	}
	s := pod.Spec
	if s.RestartPolicy != v1.RestartPolicyAlways || s.DNSPolicy != v1.DNSClusterFirst ||
		*s.TerminationGracePeriodSeconds != 30 || s.SchedulerName != "default-scheduler" ||
		s.SecurityContext == nil || !*s.EnableServiceLinks {
		t.Errorf("spec defaults missing: %+v", s)
	}
	if got := s.Containers[0].ImagePullPolicy; got != v1.PullIfNotPresent {
		t.Errorf("nginx:1.27 pull policy %q", got)
	}
	if got := s.Containers[1].ImagePullPolicy; got != v1.PullAlways {
		t.Errorf("busybox pull policy %q", got)
	}
	if got := s.Containers[0].Ports[0].Protocol; got != v1.ProtocolTCP {
		t.Errorf("port protocol %q", got)
	}
	if s.Containers[0].TerminationMessagePath != "/dev/termination-log" || s.Containers[0].TerminationMessagePolicy != v1.TerminationMessageReadFile {
		t.Errorf("termination message defaults missing")
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]v1.PullPolicy{
		"busybox":                        v1.PullAlways,
		"busybox:latest":                 v1.PullAlways,
		"busybox:1.36":                   v1.PullIfNotPresent,
		"localhost:5000/busybox":         v1.PullAlways,
		"localhost:5000/busybox:1":       v1.PullIfNotPresent,
		"busybox@sha256:0123456789abcd":  v1.PullIfNotPresent,
		"busybox:latest@sha256:0123abcd": v1.PullAlways,
		"localhost:5000/b:latest":        v1.PullAlways,
		"":                               v1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(image); got != want {
			t.Errorf("%s: %q, want %q", image, got, want)
		}
	}
}

func TestDecodeManifestHTTPOriginHasNoToleration(t *testing.T) {
	pod, err := DecodeManifest([]byte(webYAML), Origin{Source: HTTPSource, Location: "http://x/m", NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Tolerations) != 0 {
		t.Errorf("tolerations %+v on an http pod", pod.Spec.Tolerations)
	}
	if pod.Annotations[ConfigSourceAnnotation] != HTTPSource {
		t.Errorf("source %q", pod.Annotations[ConfigSourceAnnotation])
	}
}

func TestStaticPodUID(t *testing.T) {
	uid := func(data string, o Origin) string {
		t.Helper()
		pod, err := DecodeManifest([]byte(data), o)
		if err != nil {
			t.Fatal(err)
		}
		return string(pod.UID)
	}
	base := uid(webYAML, fileOrigin)
	if again := uid(webYAML, fileOrigin); again != base {
		t.Errorf("same manifest, UIDs %s and %s", base, again)
	}
	// Formatting alone (JSON instead of YAML, comments) does not change the pod.
	js := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"containers":[` +
		`{"name":"app","image":"nginx:1.27","ports":[{"containerPort":80}]},{"name":"sidecar","image":"busybox"}]}}`
	if got := uid(js, fileOrigin); got != base {
		t.Errorf("same pod as JSON: UID %s, want %s", got, base)
	}
	if got := uid("# a comment\n"+webYAML, fileOrigin); got != base {
		t.Errorf("comment changed the UID")
	}
	if got := uid(strings.Replace(webYAML, "1.27", "1.28", 1), fileOrigin); got == base {
		t.Errorf("changed image kept the UID")
	}
	other := fileOrigin
	other.Location = "/etc/kubernetes/manifests/web2.yaml"
	if got := uid(webYAML, other); got == base {
		t.Errorf("another file kept the UID")
	}
	other = fileOrigin
	other.NodeName = "node-2"
	if got := uid(webYAML, other); got == base {
		t.Errorf("another node kept the UID")
	}
	given := strings.Replace(webYAML, "  name: web\n", "  name: web\n  uid: 0b5c7f1e-user-given\n", 1)
	pod, err := DecodeManifest([]byte(given), fileOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID != "0b5c7f1e-user-given" || pod.Annotations[ConfigHashAnnotation] != "0b5c7f1e-user-given" {
		t.Errorf("user-given UID not kept: uid %q hash %q", pod.UID, pod.Annotations[ConfigHashAnnotation])
	}
}

func TestDecodeManifestErrors(t *testing.T) {
	pod := func(spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n" + spec
	}
	const loc = "podsource: file /etc/kubernetes/manifests/web.yaml: "
	for _, tc := range []struct {
		name, data, want string
	}{
		{"duplicate container", pod("  containers:\n  - name: app\n    image: a\n  - name: app\n    image: b\n"),
			`spec.containers[1].name: Duplicate value: "app"`},
		{"init and regular share a name", pod("  initContainers:\n  - name: app\n    image: a\n  containers:\n  - name: app\n    image: b\n"),
			`spec.containers[0].name: Duplicate value: "app"`},
		{"no containers", pod("  restartPolicy: Always\n"), `spec.containers: Required value`},
		{"no image", pod("  containers:\n  - name: app\n"), `spec.containers[0].image: Required value`},
		{"bad container name", pod("  containers:\n  - name: App_1\n    image: a\n"), `spec.containers[0].name: Invalid value: "App_1"`},
		{"bad pod name", strings.Replace(webYAML, "name: web", "name: Web_Server", 1), `metadata.name: Invalid value: "Web_Server-node-1"`},
		{"no name", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: b\n", `metadata.name: Required value`},
		{"bad namespace", strings.Replace(webYAML, "  name: web\n", "  name: web\n  namespace: Kube.System\n", 1), `metadata.namespace: Invalid value: "Kube.System"`},
		{"secret volume", pod("  containers:\n  - name: app\n    image: a\n  volumes:\n  - name: s\n    secret:\n      secretName: x\n"),
			`spec.volumes[0].secret: Forbidden: static pods may not reference secrets`},
		{"configmap volume", pod("  containers:\n  - name: app\n    image: a\n  volumes:\n  - name: c\n    configMap:\n      name: x\n"),
			`spec.volumes[0].configMap: Forbidden: static pods may not reference configmaps`},
		{"projected token", pod("  containers:\n  - name: app\n    image: a\n  volumes:\n  - name: t\n    projected:\n      sources:\n      - serviceAccountToken:\n          path: token\n"),
			`spec.volumes[0].projected.sources[0].serviceAccountToken: Forbidden: static pods may not reference serviceaccounts`},
		{"service account", pod("  serviceAccountName: default\n  containers:\n  - name: app\n    image: a\n"),
			`spec.serviceAccountName: Forbidden: static pods may not reference serviceaccounts`},
		{"secret env", pod("  containers:\n  - name: app\n    image: a\n    env:\n    - name: X\n      valueFrom:\n        secretKeyRef:\n          name: s\n          key: k\n"),
			`spec.containers[0].env[0].valueFrom.secretKeyRef: Forbidden: static pods may not reference secrets`},
		{"mount of no volume", pod("  containers:\n  - name: app\n    image: a\n    volumeMounts:\n    - name: data\n      mountPath: /data\n"),
			`spec.containers[0].volumeMounts[0].name: Not found: "data"`},
		{"bad port", pod("  containers:\n  - name: app\n    image: a\n    ports:\n    - containerPort: 70000\n"),
			`spec.containers[0].ports[0].containerPort: Invalid value: 70000`},
		{"bad restart policy", pod("  restartPolicy: Sometimes\n  containers:\n  - name: app\n    image: a\n"),
			`spec.restartPolicy: Unsupported value: "Sometimes"`},
		{"not a pod", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n", `kind "Service": want "Pod"`},
		{"no kind", "metadata:\n  name: x\n", `kind: Required value`},
		{"wrong apiVersion", strings.Replace(webYAML, "apiVersion: v1", "apiVersion: apps/v1", 1), `apiVersion "apps/v1": want "v1"`},
		{"not yaml", "{{{", "not YAML or JSON"},
		{"empty", "", "empty manifest"},
		{"a list", "- a\n- b\n", `not an object (a Pod or a PodList) but a list; it begins "- a"`},
		{"wrong type", pod("  containers: 3\n"), "decoding Pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeManifest([]byte(tc.data), fileOrigin)
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.HasPrefix(err.Error(), loc) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n  %v\nwant prefix %q and %q", err, loc, tc.want)
			}
			var me *ManifestError
			if !errors.As(err, &me) || !errors.Is(err, ErrInvalidManifest) {
				t.Errorf("%T is not a *ManifestError wrapping ErrInvalidManifest", err)
			}
		})
	}
}

func TestValidateStaticPodFieldTypes(t *testing.T) {
	pod, err := DecodeManifest([]byte(webYAML), fileOrigin)
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[1].Name = "app"
	errs := ValidateStaticPod(pod)
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeDuplicate || errs[0].Field != "spec.containers[1].name" {
		t.Fatalf("errors %v", errs)
	}
}

func TestDecodeManifestList(t *testing.T) {
	o := Origin{Source: HTTPSource, Location: "http://config/pods", NodeName: "n1"}
	item := func(name string) string {
		return `{"metadata":{"name":"` + name + `"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}`
	}
	for _, tc := range []struct {
		name, data string
		want       []string
		err        string
	}{
		{"pod", webYAML, []string{"web-n1"}, ""},
		{"podlist", `{"apiVersion":"v1","kind":"PodList","items":[` + item("a") + `,` + item("b") + `]}`, []string{"a-n1", "b-n1"}, ""},
		{"list", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod",` + item("a")[1:] + `]}`, []string{"a-n1"}, ""},
		{"list of services", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}]}`, nil, `items[0]: kind "Service": want "Pod"`},
		{"bad item", `{"apiVersion":"v1","kind":"PodList","items":[` + item("a") + `,{"metadata":{"name":"b"},"spec":{}}]}`, nil, `items[1].spec.containers: Required value`},
		{"empty podlist", `{"apiVersion":"v1","kind":"PodList","items":[]}`, []string{}, ""},
		{"deployment", `{"apiVersion":"apps/v1","kind":"Deployment"}`, nil, `kind "Deployment": want Pod, PodList or List`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := DecodeManifestList([]byte(tc.data), o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "podsource: http http://config/pods: ") {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("names %v, want %v", names, tc.want)
			}
		})
	}
}
