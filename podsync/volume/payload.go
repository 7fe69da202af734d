package volume

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Default modes, the API's defaults for volumes that leave them unset.
const (
	defaultMode fs.FileMode = 0o644
)

func fileMode(item *int32, def *int32) fs.FileMode {
	switch {
	case item != nil:
		return fs.FileMode(*item) & fs.ModePerm
	case def != nil:
		return fs.FileMode(*def) & fs.ModePerm
	}
	return defaultMode
}

// keysPayload is the payload of a Secret's or ConfigMap's data: every key
// as a file named after it, or only the items, each at its path.
func keysPayload(data map[string][]byte, items []corev1.KeyToPath, defMode *int32, optional bool, what string) (map[string]File, error) {
	out := make(map[string]File, len(data))
	if len(items) == 0 {
		for k, v := range data {
			out[k] = File{Data: v, Mode: fileMode(nil, defMode)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s references non-existent %s key: %s", what, strings.Fields(what)[0], it.Key)
		}
		out[it.Path] = File{Data: v, Mode: fileMode(it.Mode, defMode)}
	}
	return out, nil
}

func configMapData(cm *corev1.ConfigMap) map[string][]byte {
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data
}

// formatMap renders labels or annotations as a downward-API file does:
// key="quoted value" lines in key order.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// podField is a downward-API field a volume file can hold.
func podField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// downwardPayload is the payload of a downwardAPI volume or projection.
func (m *Manager) downwardPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defMode *int32) (map[string]File, error) {
	out := make(map[string]File, len(items))
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podField(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			var c *corev1.Container
			for i := range pod.Spec.Containers {
				if pod.Spec.Containers[i].Name == it.ResourceFieldRef.ContainerName {
					c = &pod.Spec.Containers[i]
				}
			}
			if c == nil {
				err = fmt.Errorf("container %q not found", it.ResourceFieldRef.ContainerName)
			} else {
				v, err = m.resourceValue(c, it.ResourceFieldRef)
			}
		default:
			err = fmt.Errorf("item %s has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, err
		}
		out[it.Path] = File{Data: []byte(v), Mode: fileMode(it.Mode, defMode)}
	}
	return out, nil
}

// resourceValue is a container's resource as the downward API shows it:
// limits default to the node's allocatable when unset; the value is
// divided by the divisor (default 1) and rounded up.
func (m *Manager) resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kindName, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kindName != "limits" && kindName != "requests") {
		return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
	}
	list := c.Resources.Requests
	if kindName == "limits" {
		list = c.Resources.Limits
	}
	q, set := list[corev1.ResourceName(name)]
	if !set && kindName == "limits" {
		q = m.allocatable()[corev1.ResourceName(name)]
	}
	switch corev1.ResourceName(name) {
	case corev1.ResourceCPU:
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	if strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
}

// secretPayload reads a Secret volume's payload; a missing optional Secret
// is an empty volume.
func (m *Manager) secretPayload(pod *corev1.Pod, name string, items []corev1.KeyToPath, defMode *int32, optional bool) (map[string]File, error) {
	s, err := m.secret(pod, name)
	if err != nil {
		if isNotFound(err) && optional {
			return map[string]File{}, nil
		}
		return nil, err
	}
	return keysPayload(s.Data, items, defMode, optional, "secret "+pod.Namespace+"/"+name)
}

func (m *Manager) configMapPayload(pod *corev1.Pod, name string, items []corev1.KeyToPath, defMode *int32, optional bool) (map[string]File, error) {
	cm, err := m.configMap(pod, name)
	if err != nil {
		if isNotFound(err) && optional {
			return map[string]File{}, nil
		}
		return nil, err
	}
	return keysPayload(configMapData(cm), items, defMode, optional, "configmap "+pod.Namespace+"/"+name)
}

// projectedPayload merges a projected volume's sources; two sources may not
// write the same path.
func (m *Manager) projectedPayload(ctx context.Context, pod *corev1.Pod, v *corev1.ProjectedVolumeSource) (map[string]File, error) {
	out := map[string]File{}
	for i, src := range v.Sources {
		var part map[string]File
		var err error
		switch {
		case src.Secret != nil:
			part, err = m.secretPayload(pod, src.Secret.Name, src.Secret.Items, v.DefaultMode, src.Secret.Optional != nil && *src.Secret.Optional)
		case src.ConfigMap != nil:
			part, err = m.configMapPayload(pod, src.ConfigMap.Name, src.ConfigMap.Items, v.DefaultMode, src.ConfigMap.Optional != nil && *src.ConfigMap.Optional)
		case src.DownwardAPI != nil:
			part, err = m.downwardPayload(pod, src.DownwardAPI.Items, v.DefaultMode)
		case src.ServiceAccountToken != nil:
			tr, terr := m.tokens.get(ctx, pod, src.ServiceAccountToken)
			if terr != nil {
				return nil, terr
			}
			// As the kubelet: a token is owned by the user every container
			// runs as, if they all run as one, and is 0600 when it has an
			// owner or the pod an fsGroup (group read is added for that).
			mode := fileMode(nil, v.DefaultMode)
			owner := fsUser(pod)
			if owner != nil || hasFSGroup(pod) {
				mode = 0o600
			}
			part = map[string]File{src.ServiceAccountToken.Path: {Data: []byte(tr.Status.Token), Mode: mode, Owner: owner}}
		default:
			return nil, fmt.Errorf("projected source %d: only secret, configMap, downwardAPI and serviceAccountToken are supported", i)
		}
		if err != nil {
			return nil, err
		}
		for p, f := range part {
			cp := filepath.Clean(p)
			if _, dup := out[cp]; dup {
				return nil, fmt.Errorf("conflicting duplicate paths: %s", p)
			}
			out[cp] = f
		}
	}
	// A file may not also be a directory of another path.
	for p := range out {
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			if _, clash := out[d]; clash {
				return nil, fmt.Errorf("conflicting paths: %s is a file and a directory of %s", d, p)
			}
		}
	}
	return out, nil
}

// fsUser is the kubelet's FsUserFrom: the user every container of the pod
// (init, regular and ephemeral) runs as, from its own securityContext or
// the pod's, when they all name one and the same; nil otherwise.
func fsUser(pod *corev1.Pod) *int64 {
	var user *int64
	consistent := true
	visit := func(sc *corev1.SecurityContext) {
		var u *int64
		if sc != nil && sc.RunAsUser != nil {
			u = sc.RunAsUser
		} else if psc := pod.Spec.SecurityContext; psc != nil {
			u = psc.RunAsUser
		}
		switch {
		case u == nil:
			consistent = false
		case user == nil:
			user = u
		case *user != *u:
			consistent = false
		}
	}
	for i := range pod.Spec.InitContainers {
		visit(pod.Spec.InitContainers[i].SecurityContext)
	}
	for i := range pod.Spec.Containers {
		visit(pod.Spec.Containers[i].SecurityContext)
	}
	for i := range pod.Spec.EphemeralContainers {
		visit(pod.Spec.EphemeralContainers[i].SecurityContext)
	}
	if !consistent || user == nil {
		return nil
	}
	v := *user
	return &v
}

// hasFSGroup reports whether the pod sets an fsGroup.
func hasFSGroup(pod *corev1.Pod) bool {
	sc := pod.Spec.SecurityContext
	return sc != nil && sc.FSGroup != nil && *sc.FSGroup >= 0
}
