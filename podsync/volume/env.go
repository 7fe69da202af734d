package volume

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnvFrom returns the container's envFrom variables (ConfigMaps and Secrets
// in order, a later source overriding an earlier one, keys sorted within a
// source, the prefix applied) and, when the pod's enableServiceLinks is not
// false, the service variables of its namespace and of the master service
// (default/kubernetes, always). A missing optional source is skipped; a
// missing required one, or one the node may not read, is an error (the
// container waits in CreateContainerConfigError). As the kubelet v1.37
// does, keys are taken as they are: the API server accepts any printable
// name.
func (m *Manager) EnvFrom(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (envFrom, services []corev1.EnvVar, err error) {
	vals := map[string]string{}
	var order []string
	add := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, ef := range c.EnvFrom {
		var data map[string][]byte
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := m.configMap(pod, ef.ConfigMapRef.Name)
			if err != nil {
				if isNotFound(err) && ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
					continue
				}
				return nil, nil, err
			}
			data = configMapData(cm)
		case ef.SecretRef != nil:
			s, err := m.secret(pod, ef.SecretRef.Name)
			if err != nil {
				if isNotFound(err) && ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
					continue
				}
				return nil, nil, err
			}
			data = s.Data
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			add(ef.Prefix+k, string(data[k]))
		}
	}
	for _, k := range order {
		envFrom = append(envFrom, corev1.EnvVar{Name: k, Value: vals[k]})
	}
	services, err = m.serviceEnv(pod)
	return envFrom, services, err
}

// EnvValue resolves an env var source the node answers from the API or
// from the container's resources: configMapKeyRef, secretKeyRef and
// resourceFieldRef. ok false: an optional source is missing and the
// variable is left out.
func (m *Manager) EnvValue(ctx context.Context, pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := m.configMap(pod, ref.Name)
		if err != nil {
			if isNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := configMapData(cm)[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := m.secret(pod, ref.Name)
		if err != nil {
			if isNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	case src.ResourceFieldRef != nil:
		ref := src.ResourceFieldRef
		target := c
		if ref.ContainerName != "" {
			target = nil
			for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				for i := range list {
					if list[i].Name == ref.ContainerName {
						target = &list[i]
					}
				}
			}
			if target == nil {
				return "", false, fmt.Errorf("container %q not found in pod %s/%s", ref.ContainerName, pod.Namespace, pod.Name)
			}
		}
		v, err := m.resourceValue(target, ref)
		return v, err == nil, err
	}
	return "", false, fmt.Errorf("unsupported env var source")
}

// masterService is the service every pod gets variables for.
const masterService = "kubernetes"

// serviceEnv is the service variables of the pod's namespace (when its
// enableServiceLinks is not false) and of default/kubernetes.
func (m *Manager) serviceEnv(pod *corev1.Pod) ([]corev1.EnvVar, error) {
	if m.services == nil {
		return nil, nil
	}
	if !isStatic(pod) && !m.services.HasSynced() {
		// Wait a little for the first list, as for an object's.
		t := m.clock.NewTimer(m.syncTimeout)
		select {
		case <-m.services.synced:
		case <-t.C():
		}
		t.Stop()
	}
	if !isStatic(pod) && !m.services.HasSynced() {
		return nil, fmt.Errorf("services have not yet been read at least once, cannot construct envvars")
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	byName := map[string]*corev1.Service{}
	for _, obj := range m.services.List() {
		s, ok := obj.(*corev1.Service)
		if !ok || s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		switch {
		case s.Namespace == metav1.NamespaceDefault && s.Name == masterService:
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		case s.Namespace == pod.Namespace && links:
			byName[s.Name] = s
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []corev1.EnvVar
	for _, n := range names {
		out = append(out, ServiceEnvVars(byName[n])...)
	}
	return out, nil
}

// ServiceEnvVars is the kubelet's variables for one service:
// <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT, <NAME>_SERVICE_PORT_<PORT>
// for named ports, and the Docker link variables <NAME>_PORT and
// <NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]. NAME is the service name
// upper-cased with '-' as '_'.
func ServiceEnvVars(s *corev1.Service) []corev1.EnvVar {
	if len(s.Spec.Ports) == 0 {
		return nil
	}
	name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	ip := s.Spec.ClusterIP
	out := []corev1.EnvVar{
		{Name: name + "_SERVICE_HOST", Value: ip},
		{Name: name + "_SERVICE_PORT", Value: strconv.Itoa(int(s.Spec.Ports[0].Port))},
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			out = append(out, corev1.EnvVar{Name: name + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), Value: strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(corev1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		port := strconv.Itoa(int(p.Port))
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			out = append(out, corev1.EnvVar{Name: name + "_PORT", Value: url})
		}
		prefix := name + "_PORT_" + port + "_" + strings.ToUpper(proto)
		out = append(out,
			corev1.EnvVar{Name: prefix, Value: url},
			corev1.EnvVar{Name: prefix + "_PROTO", Value: strings.ToLower(proto)},
			corev1.EnvVar{Name: prefix + "_PORT", Value: port},
			corev1.EnvVar{Name: prefix + "_ADDR", Value: ip},
		)
	}
	return out
}
