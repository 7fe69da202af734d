package podsource

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// qosClass is kubelet's QoS rule (pkg/apis/core/v1/helper/qos), for cpu and
// memory over init and regular containers: no requests or limits at all is
// BestEffort; limits for both on every container, with requests equal to
// them, is Guaranteed; anything else Burstable.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	add := func(into v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[name]
			lim, hasLim := c.Resources.Limits[name]
			if hasReq && !req.IsZero() {
				add(requests, name, req)
			}
			if hasLim && !lim.IsZero() {
				add(limits, name, lim)
			} else {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if !guaranteed {
		return v1.PodQOSBurstable
	}
	for name, req := range requests {
		if lim := limits[name]; lim.Cmp(req) != 0 {
			return v1.PodQOSBurstable
		}
	}
	if len(requests) != len(limits) {
		return v1.PodQOSBurstable
	}
	return v1.PodQOSGuaranteed
}

const limitsOnlyYAML = `apiVersion: v1
kind: Pod
metadata:
  name: etcd
spec:
  hostNetwork: true
  initContainers:
  - name: init
    image: busybox:1.36
    resources:
      limits: {cpu: 100m, memory: 64Mi}
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.21-0
    resources:
      limits: {cpu: 500m, memory: 512Mi}
      requests: {cpu: 500m}
    ports:
    - containerPort: 2379
    env:
    - name: POD_IP
      valueFrom:
        fieldRef: {fieldPath: status.podIP}
    livenessProbe:
      httpGet: {port: 2381, path: /health}
    startupProbe:
      grpc: {port: 2379}
    lifecycle:
      preStop:
        httpGet: {port: 2381}
    volumeMounts:
    - {name: data, mountPath: /var/lib/etcd}
    - {name: certs, mountPath: /etc/kubernetes/pki/etcd}
    - {name: scratch, mountPath: /tmp}
    - {name: info, mountPath: /info}
  - name: latest
    image: busybox:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    resources:
      limits: {cpu: "0.0001", memory: 32Mi}
  volumes:
  - name: data
    hostPath: {path: /var/lib/etcd}
  - name: certs
    hostPath: {path: /etc/kubernetes/pki/etcd, type: DirectoryOrCreate}
  - name: scratch
  - name: info
    downwardAPI:
      items:
      - path: labels
        fieldRef: {fieldPath: metadata.labels}
`

// A static pod gets every default the API gives a v1 Pod, requests from
// limits included, so its QoS class is the one the API server (and kubelet)
// computes.
func TestDecodeManifestAppliesAllPodDefaults(t *testing.T) {
	pod, err := DecodeManifest([]byte(limitsOnlyYAML), fileOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if got := qosClass(pod); got != v1.PodQOSGuaranteed {
		t.Errorf("QoS class %s, want Guaranteed (requests default to limits)", got)
	}
	etcd, init, latest := pod.Spec.Containers[0], pod.Spec.InitContainers[0], pod.Spec.Containers[1]
	for _, c := range []v1.Container{etcd, init, latest} {
		for name, lim := range c.Resources.Limits {
			if req := c.Resources.Requests[name]; req.Cmp(lim) != 0 {
				t.Errorf("%s: %s request %s, want the limit %s", c.Name, name, req.String(), lim.String())
			}
		}
		if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != v1.TerminationMessageReadFile {
			t.Errorf("%s: termination message %q %q", c.Name, c.TerminationMessagePath, c.TerminationMessagePolicy)
		}
	}
	if got := latest.Resources.Limits[v1.ResourceCPU]; got.String() != "1m" {
		t.Errorf("cpu limit 0.0001 became %s, want 1m (rounded up to milli units)", got.String())
	}
	if init.ImagePullPolicy != v1.PullIfNotPresent || etcd.ImagePullPolicy != v1.PullIfNotPresent || latest.ImagePullPolicy != v1.PullAlways {
		t.Errorf("pull policies %q %q %q, want IfNotPresent IfNotPresent Always", init.ImagePullPolicy, etcd.ImagePullPolicy, latest.ImagePullPolicy)
	}
	if p := etcd.Ports[0]; p.Protocol != v1.ProtocolTCP || p.HostPort != 2379 {
		t.Errorf("port %+v, want TCP and hostPort 2379 (hostNetwork)", p)
	}
	if got := etcd.Env[0].ValueFrom.FieldRef.APIVersion; got != "v1" {
		t.Errorf("fieldRef apiVersion %q", got)
	}
	lp := etcd.LivenessProbe
	if lp.TimeoutSeconds != 1 || lp.PeriodSeconds != 10 || lp.SuccessThreshold != 1 || lp.FailureThreshold != 3 ||
		lp.HTTPGet.Scheme != v1.URISchemeHTTP || lp.HTTPGet.Path != "/health" {
		t.Errorf("liveness probe %+v", lp)
	}
	if sp := etcd.StartupProbe; sp.GRPC.Service == nil || *sp.GRPC.Service != "" || sp.FailureThreshold != 3 {
		t.Errorf("startup probe %+v", sp)
	}
	if h := etcd.Lifecycle.PreStop.HTTPGet; h.Path != "/" || h.Scheme != v1.URISchemeHTTP {
		t.Errorf("preStop httpGet %+v", h)
	}
	vols := pod.Spec.Volumes
	if typ := vols[0].HostPath.Type; typ == nil || *typ != v1.HostPathUnset {
		t.Errorf("hostPath type %v, want \"\"", typ)
	}
	if typ := vols[1].HostPath.Type; typ == nil || *typ != v1.HostPathDirectoryOrCreate {
		t.Errorf("hostPath type %v, want kept", typ)
	}
	if vols[2].EmptyDir == nil {
		t.Errorf("volume without a source: %+v, want emptyDir", vols[2].VolumeSource)
	}
	if d := vols[3].DownwardAPI; *d.DefaultMode != 0o644 || d.Items[0].FieldRef.APIVersion != "v1" {
		t.Errorf("downwardAPI %+v", d)
	}
	s := pod.Spec
	if s.RestartPolicy != v1.RestartPolicyAlways || s.DNSPolicy != v1.DNSClusterFirst ||
		*s.TerminationGracePeriodSeconds != 30 || s.SchedulerName != "default-scheduler" ||
		s.SecurityContext == nil || !*s.EnableServiceLinks {
		t.Errorf("pod defaults missing: %+v", s)
	}
}

// The volume and container defaults that static pods cannot use (they are
// refused by validation) are applied by SetPodDefaults all the same.
func TestSetPodDefaultsVolumesAndEphemeral(t *testing.T) {
	neg := int64(-5)
	pod := &v1.Pod{Spec: v1.PodSpec{
		TerminationGracePeriodSeconds: &neg,
		DeprecatedServiceAccount:      "old",
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox", Ports: []v1.ContainerPort{{ContainerPort: 1}},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}},
		}}},
		Volumes: []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
			{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
			{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}},
				{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "l", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
			}}}},
			{Name: "i", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "img"}}},
			{Name: "r", VolumeSource: v1.VolumeSource{RBD: &v1.RBDVolumeSource{}}},
			{Name: "a", VolumeSource: v1.VolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{}}},
			{Name: "e", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{}}}},
		},
	}}
	SetPodDefaults(pod)
	s := pod.Spec
	if *s.TerminationGracePeriodSeconds != 1 {
		t.Errorf("negative grace period became %d, want 1", *s.TerminationGracePeriodSeconds)
	}
	if s.ServiceAccountName != "old" || s.DeprecatedServiceAccount != "old" {
		t.Errorf("service account %q/%q", s.ServiceAccountName, s.DeprecatedServiceAccount)
	}
	e := s.EphemeralContainers[0]
	if e.ImagePullPolicy != v1.PullAlways || e.Ports[0].Protocol != v1.ProtocolTCP || e.Resources.Requests != nil {
		t.Errorf("ephemeral container %+v", e.EphemeralContainerCommon)
	}
	v := s.Volumes
	if *v[0].Secret.DefaultMode != 0o644 || *v[1].ConfigMap.DefaultMode != 0o644 || *v[2].Projected.DefaultMode != 0o644 {
		t.Errorf("default modes not 0644")
	}
	if *v[2].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != 3600 ||
		v[2].Projected.Sources[1].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" {
		t.Errorf("projected sources %+v", v[2].Projected.Sources)
	}
	if v[3].Image.PullPolicy != v1.PullAlways {
		t.Errorf("image volume pull policy %q", v[3].Image.PullPolicy)
	}
	if r := v[4].RBD; r.RBDPool != "rbd" || r.RadosUser != "admin" || r.Keyring != "/etc/ceph/keyring" {
		t.Errorf("rbd %+v", r)
	}
	if a := v[5].AzureDisk; *a.CachingMode != v1.AzureDataDiskCachingReadWrite || *a.FSType != "ext4" || *a.ReadOnly || *a.Kind != v1.AzureSharedBlobDisk {
		t.Errorf("azureDisk %+v", a)
	}
	if m := v[6].Ephemeral.VolumeClaimTemplate.Spec.VolumeMode; m == nil || *m != v1.PersistentVolumeFilesystem {
		t.Errorf("ephemeral volumeMode %v", m)
	}
}
