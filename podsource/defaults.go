package podsource

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// API default values that SetPodDefaults fills in.
const (
	DefaultTerminationGracePeriodSeconds = int64(30)
	DefaultSchedulerName                 = v1.DefaultSchedulerName
	DefaultTerminationMessagePath        = v1.TerminationMessagePathDefault
)

// SetPodDefaults fills in the API server's defaults for the fields a node
// agent reads, as decoding a v1 Pod in the API server would (a subset of
// k8s.io/api's defaulting, without importing k8s.io/kubernetes):
//
//   - spec: restartPolicy Always, dnsPolicy ClusterFirst,
//     terminationGracePeriodSeconds 30, schedulerName default-scheduler,
//     securityContext {}, enableServiceLinks true;
//   - every container (init, regular): imagePullPolicy Always for an image
//     with no tag or tag "latest" and no digest, IfNotPresent otherwise;
//     terminationMessagePath /dev/termination-log, terminationMessagePolicy
//     File; port protocol TCP, and with hostNetwork hostPort = containerPort;
//     probes timeout 1s, period 10s, success 1, failure 3, HTTP GET scheme
//     HTTP and path "/"; env fieldRef apiVersion v1;
//   - volumes with no source become emptyDir; downwardAPI and projected
//     defaultMode 0644.
//
// Fields already set are kept.
func SetPodDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := DefaultTerminationGracePeriodSeconds
		s.TerminationGracePeriodSeconds = &g
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
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
}

func defaultContainer(c *v1.Container, hostNetwork bool) {
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
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
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
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = v1.URISchemeHTTP
		}
	}
}

func defaultVolume(v *v1.Volume) {
	vs := &v.VolumeSource
	if *vs == (v1.VolumeSource{}) {
		vs.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	mode := v1.DownwardAPIVolumeSourceDefaultMode
	if vs.DownwardAPI != nil && vs.DownwardAPI.DefaultMode == nil {
		vs.DownwardAPI.DefaultMode = &mode
	}
	if vs.Projected != nil && vs.Projected.DefaultMode == nil {
		m := v1.ProjectedVolumeSourceDefaultMode
		vs.Projected.DefaultMode = &m
	}
	if vs.HostPath != nil && vs.HostPath.Type == nil {
		t := v1.HostPathUnset
		vs.HostPath.Type = &t
	}
}

// defaultPullPolicy is Always for an image without a tag or with tag
// "latest" (and no digest), IfNotPresent otherwise.
func defaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	last := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(last, ":")
	if i < 0 || last[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
