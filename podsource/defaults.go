package podsource

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// API default values that SetPodDefaults fills in.
const (
	DefaultTerminationGracePeriodSeconds = int64(v1.DefaultTerminationGracePeriodSeconds)
	DefaultSchedulerName                 = v1.DefaultSchedulerName
	DefaultTerminationMessagePath        = v1.TerminationMessagePathDefault
)

// SetPodDefaults applies every default that decoding a v1 Pod applies in
// kubelet (and in the API server) with v1.37's default feature gates,
// written for nodekit so that it need not import k8s.io/kubernetes. Fields
// already set are kept.
//
// Pod:
//   - terminationGracePeriodSeconds 30, and 1 if negative; restartPolicy
//     Always; dnsPolicy ClusterFirst; schedulerName default-scheduler;
//     securityContext {}; enableServiceLinks true; serviceAccountName and
//     the deprecated serviceAccount copied into each other;
//   - with hostNetwork, every container and init container port's hostPort
//     defaults to its containerPort;
//   - resource quantities (container and pod-level requests and limits,
//     overhead) rounded up to milli units;
//   - status.podIP and status.podIPs kept in step.
//
// Every container, init container and ephemeral container:
//   - resources.requests defaulted from resources.limits for each resource
//     with a limit and no request (init and regular containers), so a
//     limits-only pod is Guaranteed as it is in the API server;
//   - imagePullPolicy Always when the image's tag is "latest", or it has
//     neither tag nor digest, IfNotPresent otherwise;
//   - terminationMessagePath /dev/termination-log, terminationMessagePolicy
//     File;
//   - ports protocol TCP;
//   - env valueFrom.fieldRef apiVersion v1, valueFrom.fileKeyRef optional
//     false;
//   - liveness, readiness and startup probes: timeoutSeconds 1,
//     periodSeconds 10, successThreshold 1, failureThreshold 3; httpGet path
//     "/" and scheme HTTP; grpc service ""; lifecycle postStart and preStop
//     httpGet path "/" and scheme HTTP.
//
// Volumes:
//   - a volume with no source is an emptyDir;
//   - hostPath type "" (no check); secret, configMap, downwardAPI and
//     projected defaultMode 0644; downwardAPI items' fieldRef apiVersion v1
//     (in projected sources too); projected serviceAccountToken
//     expirationSeconds 3600;
//   - image pullPolicy as for containers;
//   - iscsi iscsiInterface "default"; rbd pool "rbd", user "admin", keyring
//     /etc/ceph/keyring; azureDisk cachingMode ReadWrite, fsType ext4,
//     readOnly false, kind Shared; scaleIO storageMode ThinProvisioned,
//     fsType xfs; ephemeral volumeClaimTemplate volumeMode Filesystem.
//
// Not applied, as kubelet does not apply them either: pod-level requests
// from pod-level limits (the API server does it at creation with
// PodLevelResourcesFixDefaulting, on by default in v1.37), and the httpGet
// protocol of the alpha H2CContainerProbe gate.
func SetPodDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if g := s.TerminationGracePeriodSeconds; g == nil {
		d := DefaultTerminationGracePeriodSeconds
		s.TerminationGracePeriodSeconds = &d
	} else if *g < 0 {
		one := int64(1)
		s.TerminationGracePeriodSeconds = &one
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.SchedulerName == "" {
		s.SchedulerName = DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		t := v1.DefaultEnableServiceLinks
		s.EnableServiceLinks = &t
	}
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName

	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork, true)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork, true)
	}
	for i := range s.EphemeralContainers {
		defaultContainer((*v1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon), false, false)
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
	roundUp(s.Overhead)
	if s.Resources != nil {
		roundUp(s.Resources.Limits)
		roundUp(s.Resources.Requests)
	}

	st := &pod.Status
	switch {
	case st.PodIP != "" && len(st.PodIPs) == 0:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	case st.PodIP == "" && len(st.PodIPs) > 0:
		st.PodIP = st.PodIPs[0].IP
	case st.PodIP != "" && st.PodIPs[0].IP != st.PodIP:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	}
}

// defaultContainer defaults one container. hostNetwork makes hostPort
// default to containerPort; requestsFromLimits is false for ephemeral
// containers, which have no resources of their own.
func defaultContainer(c *v1.Container, hostNetwork, requestsFromLimits bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = DefaultTerminationMessagePath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		vf := c.Env[i].ValueFrom
		if vf == nil {
			continue
		}
		defaultFieldRef(vf.FieldRef)
		if vf.FileKeyRef != nil && vf.FileKeyRef.Optional == nil {
			f := false
			vf.FileKeyRef.Optional = &f
		}
	}
	r := &c.Resources
	roundUp(r.Limits)
	roundUp(r.Requests)
	if requestsFromLimits && r.Limits != nil {
		if r.Requests == nil {
			r.Requests = make(v1.ResourceList, len(r.Limits))
		}
		for name, q := range r.Limits {
			if _, ok := r.Requests[name]; !ok {
				r.Requests[name] = q.DeepCopy()
			}
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			defaultHTTPGet(l.PostStart.HTTPGet)
		}
		if l.PreStop != nil {
			defaultHTTPGet(l.PreStop.HTTPGet)
		}
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if g := p.GRPC; g != nil && g.Service == nil {
		empty := ""
		g.Service = &empty
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func defaultFieldRef(f *v1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

func defaultMode(m **int32, mode int32) {
	if *m == nil {
		*m = &mode
	}
}

func defaultVolume(v *v1.Volume) {
	vs := &v.VolumeSource
	if *vs == (v1.VolumeSource{}) {
		vs.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if vs.HostPath != nil && vs.HostPath.Type == nil {
		t := v1.HostPathUnset
		vs.HostPath.Type = &t
	}
	if vs.Secret != nil {
		defaultMode(&vs.Secret.DefaultMode, v1.SecretVolumeSourceDefaultMode)
	}
	if vs.ConfigMap != nil {
		defaultMode(&vs.ConfigMap.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode)
	}
	if d := vs.DownwardAPI; d != nil {
		defaultMode(&d.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode)
		for i := range d.Items {
			defaultFieldRef(d.Items[i].FieldRef)
		}
	}
	if p := vs.Projected; p != nil {
		defaultMode(&p.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
		for i := range p.Sources {
			src := &p.Sources[i]
			if src.DownwardAPI != nil {
				for j := range src.DownwardAPI.Items {
					defaultFieldRef(src.DownwardAPI.Items[j].FieldRef)
				}
			}
			if t := src.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				hour := int64(3600)
				t.ExpirationSeconds = &hour
			}
		}
	}
	if img := vs.Image; img != nil && img.PullPolicy == "" {
		img.PullPolicy = defaultPullPolicy(img.Reference)
	}
	if s := vs.ISCSI; s != nil {
		orDefault(&s.ISCSIInterface, "default")
	}
	if r := vs.RBD; r != nil {
		orDefault(&r.RBDPool, "rbd")
		orDefault(&r.RadosUser, "admin")
		orDefault(&r.Keyring, "/etc/ceph/keyring")
	}
	if a := vs.AzureDisk; a != nil {
		if a.CachingMode == nil {
			m := v1.AzureDataDiskCachingReadWrite
			a.CachingMode = &m
		}
		if a.FSType == nil {
			fs := "ext4"
			a.FSType = &fs
		}
		if a.ReadOnly == nil {
			f := false
			a.ReadOnly = &f
		}
		if a.Kind == nil {
			k := v1.AzureSharedBlobDisk
			a.Kind = &k
		}
	}
	if s := vs.ScaleIO; s != nil {
		orDefault(&s.StorageMode, "ThinProvisioned")
		orDefault(&s.FSType, "xfs")
	}
	if e := vs.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			m := v1.PersistentVolumeFilesystem
			spec.VolumeMode = &m
		}
		roundUp(spec.Resources.Limits)
		roundUp(spec.Resources.Requests)
	}
}

// orDefault sets *s to def when it is empty.
func orDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

// roundUp rounds every quantity up to milli units, as the API does.
func roundUp(l v1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}

// defaultPullPolicy is Always for an image whose tag is "latest" or that has
// neither tag nor digest, IfNotPresent otherwise (an image that has a digest
// and no tag, or that is empty, included).
func defaultPullPolicy(image string) v1.PullPolicy {
	if image == "" {
		return v1.PullIfNotPresent
	}
	name, _, hasDigest := strings.Cut(image, "@")
	last := name[strings.LastIndex(name, "/")+1:]
	tag := ""
	if i := strings.LastIndex(last, ":"); i >= 0 {
		tag = last[i+1:]
	}
	if tag == "latest" || (tag == "" && !hasDigest) {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
