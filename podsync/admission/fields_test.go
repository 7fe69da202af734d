package admission

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// walked are the API types whose every field fieldTable must classify, by
// the name their fields have there. An ephemeral container's common fields
// are a Container's.
var walked = map[reflect.Type]string{
	reflect.TypeFor[corev1.PodSpec]():                  "PodSpec",
	reflect.TypeFor[corev1.Container]():                "Container",
	reflect.TypeFor[corev1.EphemeralContainer]():       "EphemeralContainer",
	reflect.TypeFor[corev1.EphemeralContainerCommon](): "Container",
	reflect.TypeFor[corev1.PodSecurityContext]():       "PodSecurityContext",
	reflect.TypeFor[corev1.SecurityContext]():          "SecurityContext",
	reflect.TypeFor[corev1.VolumeMount]():              "VolumeMount",
	reflect.TypeFor[corev1.ResourceRequirements]():     "ResourceRequirements",
	reflect.TypeFor[corev1.Lifecycle]():                "Lifecycle",
	reflect.TypeFor[corev1.Volume]():                   "Volume",
	reflect.TypeFor[corev1.VolumeSource]():             "VolumeSource",
	reflect.TypeFor[corev1.EmptyDirVolumeSource]():     "EmptyDirVolumeSource",
	reflect.TypeFor[corev1.ProjectedVolumeSource]():    "ProjectedVolumeSource",
	reflect.TypeFor[corev1.VolumeProjection]():         "VolumeProjection",
}

// TestEveryPodFieldClassified walks the pod API from PodSpec and fails on
// a field nobody has classified as implemented, refused or not the node's
// concern: a k8s.io/api update that adds one fails here until it is.
func TestEveryPodFieldClassified(t *testing.T) {
	seen := map[string]bool{}
	done := map[reflect.Type]bool{}
	var walk func(ty reflect.Type)
	walk = func(ty reflect.Type) {
		if done[ty] {
			return
		}
		done[ty] = true
		prefix := walked[ty]
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			key := prefix + "." + jsonName(f)
			seen[key] = true
			r, ok := fieldTable[key]
			switch {
			case !ok:
				t.Errorf("%s (%s) is not classified: add it to fieldTable as implemented, refused or notNodeConcern", key, f.Type)
			case r.note == "":
				t.Errorf("%s: no note", key)
			}
			if inner := elem(f.Type); isWalked(inner) {
				walk(inner)
			}
		}
	}
	walk(reflect.TypeFor[corev1.PodSpec]())
	for key := range fieldTable {
		if !seen[key] {
			t.Errorf("fieldTable names %s, which the walked API types do not have", key)
		}
	}
}

func elem(ty reflect.Type) reflect.Type {
	for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
		ty = ty.Elem()
	}
	return ty
}

func isWalked(ty reflect.Type) bool {
	_, ok := walked[elem(ty)]
	return ok
}

// refusedCases set each refused field on a pod that is otherwise fine.
var refusedCases = map[string]func(p *corev1.Pod){
	"PodSpec.resourceClaims": func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
	},
	"ResourceRequirements.claims": func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	},
	"Container.volumeDevices": func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
	},
	"VolumeMount.recursiveReadOnly": func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts[0].RecursiveReadOnly = new(corev1.RecursiveReadOnlyEnabled)
	},
	"VolumeMount.bindMountOptions": func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts[0].BindMountOptions = []string{"noexec"}
	},
	"EmptyDirVolumeSource.mode": func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir.Mode = new(int32(0o755)) },
	"ProjectedVolumeSource.defaultUser": func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultUser: new(int64(1000))}}})
	},
	"Lifecycle.stopSignal": func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: new(corev1.SIGUSR1)}
	},
	"EmptyDirVolumeSource.medium": func(p *corev1.Pod) {
		p.Spec.Volumes[0].EmptyDir.Medium = corev1.StorageMediumHugePages
	},
	"VolumeProjection.clusterTrustBundle": func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "ctb", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca.pem"}}}}}})
	},
	"VolumeProjection.podCertificate": func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cert", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s"}}}}}})
	},
}

func fieldsPod() *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "app", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
	}}
}

// TestUnsupportedFields: every refused field rejects a pod with a message
// naming it, and a pod using none is admitted.
func TestUnsupportedFields(t *testing.T) {
	if r := (Unsupported{}).Admit(fieldsPod(), nil); !r.Admit {
		t.Fatalf("plain pod: %+v", r)
	}
	for key, r := range fieldTable {
		if r.class != refused || strings.HasPrefix(key, "VolumeSource.") {
			continue
		}
		set, ok := refusedCases[key]
		if !ok {
			t.Errorf("%s is refused but has no case here", key)
			continue
		}
		pod := fieldsPod()
		set(pod)
		res := Unsupported{}.Admit(pod, nil)
		_, name, _ := strings.Cut(key, ".")
		if res.Admit || res.Reason != ReasonPodFeatureUnsupported || !strings.Contains(res.Message, name) || !strings.Contains(res.Message, r.note) {
			t.Errorf("%s: %+v", key, res)
		}
	}
	// A refused volume source, found by reflection over VolumeSource.
	pod := fieldsPod()
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "claim", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
	err := UnsupportedField(pod, nil)
	want := "spec.volumes[1].persistentVolumeClaim is not supported by this node: " + volumeNote
	if !errors.Is(err, ErrUnsupported) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("PVC: %v, want ...%s", err, want)
	}
	// Every volume source the table refuses is one VolumeSource has.
	var sources []string
	ty := reflect.TypeFor[corev1.VolumeSource]()
	for i := 0; i < ty.NumField(); i++ {
		sources = append(sources, "VolumeSource."+jsonName(ty.Field(i)))
	}
	for key := range fieldTable {
		if strings.HasPrefix(key, "VolumeSource.") && !slices.Contains(sources, key) {
			t.Errorf("%s is not a VolumeSource field", key)
		}
	}
}

// TestUnsupportedFieldMessages pins the message's form and the path of
// an ephemeral container checked alone.
func TestUnsupportedFieldMessages(t *testing.T) {
	pod := fieldsPod()
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
	if err := UnsupportedField(pod, nil); err == nil || err.Error() != "spec.resourceClaims is not supported by this node: nodekit does not implement dynamic resource allocation" {
		t.Errorf("resourceClaims: %v", err)
	}
	// RuntimeClasses and user namespaces are served (podsync/cri).
	pod = fieldsPod()
	pod.Spec.RuntimeClassName, pod.Spec.HostUsers = new("gvisor"), new(false)
	if err := UnsupportedField(pod, nil); err != nil {
		t.Errorf("runtimeClassName and hostUsers: %v", err)
	}
	pod = fieldsPod()
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
		VolumeDevices: []corev1.VolumeDevice{{Name: "d", DevicePath: "/dev/x"}}}}}
	ec := corev1.Container(pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
	if err := UnsupportedField(pod, &ec); err == nil || !strings.Contains(err.Error(), "spec.ephemeralContainers[0].volumeDevices ") {
		t.Errorf("ephemeral: %v", err)
	}
	if err := UnsupportedField(pod, &pod.Spec.Containers[0]); err != nil {
		t.Errorf("app alone: %v", err)
	}
}
