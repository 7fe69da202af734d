package podsource

import (
	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateStaticPod checks a defaulted static pod and returns every problem
// found, each naming its field. It checks what a node needs to run the pod
// and what the API server would refuse for its mirror pod:
//
//   - metadata.name a DNS-1123 subdomain, metadata.namespace a DNS-1123
//     label, labels and annotations well formed;
//   - at least one container; container names (init and regular together)
//     unique DNS-1123 labels; images not empty; ports in range with a known
//     protocol; environment variable names valid;
//   - volume names unique DNS-1123 labels, at most one source each, every
//     volumeMount naming a volume and having a mountPath;
//   - restartPolicy and dnsPolicy known values; no ephemeral containers;
//   - no reference to other API objects, kubelet's and NodeRestriction's rule
//     for static and mirror pods: no service account, no Secrets or
//     ConfigMaps (volumes, env, envFrom, imagePullSecrets), no projected
//     service account tokens, ClusterTrustBundles or pod certificates, no
//     persistent volume claims, ephemeral, CSI, GlusterFS or AzureFile
//     volumes, no ResourceClaims.
func ValidateStaticPod(pod *v1.Pod) field.ErrorList {
	return validateStaticPod(pod, nil)
}

func validateStaticPod(pod *v1.Pod, root *field.Path) field.ErrorList {
	var errs field.ErrorList
	meta := root.Child("metadata")
	spec := root.Child("spec")

	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), ""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
		if pod.Name != "" {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
	}
	errs = append(errs, metavalidation.ValidateLabels(pod.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, meta.Child("annotations"))...)

	s := &pod.Spec
	switch s.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), s.RestartPolicy,
			[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}))
	}
	switch s.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(spec.Child("dnsPolicy"), s.DNSPolicy,
			[]v1.DNSPolicy{v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone}))
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be non-negative"))
	}

	volumes, volErrs := validateVolumes(s.Volumes, spec.Child("volumes"))
	errs = append(errs, volErrs...)

	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], spec.Child("initContainers").Index(i), names, volumes)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], spec.Child("containers").Index(i), names, volumes)...)
	}
	if len(s.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"), "cannot be set on create"))
	}

	// References to other API objects: a static pod runs without the API
	// server, and its mirror pod would be refused by NodeRestriction.
	if s.ServiceAccountName != "" {
		errs = append(errs, field.Forbidden(spec.Child("serviceAccountName"), "static pods may not reference serviceaccounts"))
	}
	if s.DeprecatedServiceAccount != "" && s.DeprecatedServiceAccount != s.ServiceAccountName {
		errs = append(errs, field.Forbidden(spec.Child("serviceAccount"), "static pods may not reference serviceaccounts"))
	}
	for i := range s.ImagePullSecrets {
		errs = append(errs, field.Forbidden(spec.Child("imagePullSecrets").Index(i), "static pods may not reference secrets"))
	}
	if len(s.ResourceClaims) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("resourceClaims"), "static pods may not use ResourceClaims"))
	}
	return errs
}

// validateUniqueLabel checks that name is a DNS-1123 label not yet in names,
// and adds it to names.
func validateUniqueLabel(name string, p *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	switch {
	case name == "":
		errs = append(errs, field.Required(p, ""))
	case names.Has(name):
		errs = append(errs, field.Duplicate(p, name))
	default:
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
	}
	names.Insert(name)
	return errs
}

func validateVolumes(vols []v1.Volume, path *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range vols {
		v := &vols[i]
		p := path.Index(i)
		errs = append(errs, validateUniqueLabel(v.Name, p.Child("name"), names)...)
		if n := countSources(&v.VolumeSource); n > 1 {
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
		}
		errs = append(errs, forbiddenVolume(v, p)...)
	}
	return names, errs
}

func forbiddenVolume(v *v1.Volume, p *field.Path) field.ErrorList {
	vs := &v.VolumeSource
	forbid := func(child, what string) field.ErrorList {
		return field.ErrorList{field.Forbidden(p.Child(child), "static pods may not reference "+what)}
	}
	switch {
	case vs.Secret != nil:
		return forbid("secret", "secrets")
	case vs.ConfigMap != nil:
		return forbid("configMap", "configmaps")
	case vs.PersistentVolumeClaim != nil:
		return forbid("persistentVolumeClaim", "persistentvolumeclaims")
	case vs.Ephemeral != nil:
		return forbid("ephemeral", "persistentvolumeclaims (via ephemeral volumes)")
	case vs.CSI != nil:
		return forbid("csi", "csidrivers")
	case vs.Glusterfs != nil:
		return forbid("glusterfs", "endpoints")
	case vs.AzureFile != nil:
		return forbid("azureFile", "secrets (via azureFile volumes)")
	case vs.Projected != nil:
		var errs field.ErrorList
		for j, src := range vs.Projected.Sources {
			sp := p.Child("projected", "sources").Index(j)
			switch {
			case src.Secret != nil:
				errs = append(errs, field.Forbidden(sp.Child("secret"), "static pods may not reference secrets"))
			case src.ConfigMap != nil:
				errs = append(errs, field.Forbidden(sp.Child("configMap"), "static pods may not reference configmaps"))
			case src.ServiceAccountToken != nil:
				errs = append(errs, field.Forbidden(sp.Child("serviceAccountToken"), "static pods may not reference serviceaccounts"))
			case src.ClusterTrustBundle != nil:
				errs = append(errs, field.Forbidden(sp.Child("clusterTrustBundle"), "static pods may not use ClusterTrustBundle projected volume sources"))
			case src.PodCertificate != nil:
				errs = append(errs, field.Forbidden(sp.Child("podCertificate"), "static pods may not reference podcertificates"))
			case src.DownwardAPI != nil:
			default:
				errs = append(errs, field.Required(sp, "a projected volume source"))
			}
		}
		return errs
	}
	return nil
}

func countSources(vs *v1.VolumeSource) int {
	n := 0
	for _, set := range []bool{
		vs.HostPath != nil, vs.EmptyDir != nil, vs.GCEPersistentDisk != nil, vs.AWSElasticBlockStore != nil,
		vs.GitRepo != nil, vs.Secret != nil, vs.NFS != nil, vs.ISCSI != nil, vs.Glusterfs != nil,
		vs.PersistentVolumeClaim != nil, vs.RBD != nil, vs.FlexVolume != nil, vs.Cinder != nil,
		vs.CephFS != nil, vs.Flocker != nil, vs.DownwardAPI != nil, vs.FC != nil, vs.AzureFile != nil,
		vs.ConfigMap != nil, vs.VsphereVolume != nil, vs.Quobyte != nil, vs.AzureDisk != nil,
		vs.PhotonPersistentDisk != nil, vs.Projected != nil, vs.PortworxVolume != nil, vs.ScaleIO != nil,
		vs.StorageOS != nil, vs.CSI != nil, vs.Ephemeral != nil, vs.Image != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

func validateContainer(c *v1.Container, p *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	errs := validateUniqueLabel(c.Name, p.Child("name"), names)
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
	}
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		switch port.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol,
				[]v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}))
		}
	}
	for i, env := range c.Env {
		ep := p.Child("env").Index(i)
		if env.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(env.Name) {
				errs = append(errs, field.Invalid(ep.Child("name"), env.Name, msg))
			}
		}
		if vf := env.ValueFrom; vf != nil {
			if vf.SecretKeyRef != nil {
				errs = append(errs, field.Forbidden(ep.Child("valueFrom", "secretKeyRef"), "static pods may not reference secrets"))
			}
			if vf.ConfigMapKeyRef != nil {
				errs = append(errs, field.Forbidden(ep.Child("valueFrom", "configMapKeyRef"), "static pods may not reference configmaps"))
			}
		}
	}
	for i, ef := range c.EnvFrom {
		ep := p.Child("envFrom").Index(i)
		if ef.SecretRef != nil {
			errs = append(errs, field.Forbidden(ep.Child("secretRef"), "static pods may not reference secrets"))
		}
		if ef.ConfigMapRef != nil {
			errs = append(errs, field.Forbidden(ep.Child("configMapRef"), "static pods may not reference configmaps"))
		}
	}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
	}
	return errs
}
