package podsync

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Labels and annotations the kubelet puts on sandboxes and containers, and
// podsync with it, so crictl shows the same and a restarted agent (or a
// kubelet) adopts what runs.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash                     = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationContainerTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationContainerTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationContainerPreStopHandler           = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts                    = "io.kubernetes.container.ports"
	AnnotationPodDeletionGracePeriod            = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGracePeriod         = "io.kubernetes.pod.terminationGracePeriod"
)

// HashContainer is the kubelet's container hash, as the hex string it writes
// to the io.kubernetes.container.hash annotation: FNV-32a over the go-spew
// "%#v" rendering of the JSON object {"image":…,"name":…}. Only the name and
// the image count; a change of either recreates the container. For
// name "app" and image "nginx:1.25" it is "e324a2d6".
func HashContainer(c *corev1.Container) string {
	return strconv.FormatUint(uint64(hashContainer(c.Name, c.Image)), 16)
}

func hashContainer(name, image string) uint32 {
	// The JSON the kubelet hashes: encoding/json's rendering of the map
	// {"image": image, "name": name} (keys sorted, HTML characters escaped).
	var js []byte
	if jsonSafe(name) && jsonSafe(image) {
		var buf [256]byte
		js = append(buf[:0], `{"image":"`...)
		js = append(js, image...)
		js = append(js, `","name":"`...)
		js = append(js, name...)
		js = append(js, `"}`...)
	} else {
		js, _ = json.Marshal(map[string]string{"name": name, "image": image})
	}
	// FNV-32a over go-spew's %#v of a []byte: the type in parentheses, then
	// the bytes in decimal, space separated, in brackets.
	h := fnvUint8Prefix
	for i, b := range js {
		if i > 0 {
			h = (h ^ ' ') * fnvPrime
		}
		for _, c := range []byte(decimalByte[b]) {
			h = (h ^ uint32(c)) * fnvPrime
		}
	}
	return (h ^ ']') * fnvPrime
}

const fnvPrime = 16777619

var (
	// decimalByte[b] is b in decimal.
	decimalByte [256]string
	// fnvUint8Prefix is FNV-32a's state after "([]uint8)[".
	fnvUint8Prefix uint32
)

func init() {
	for i := range decimalByte {
		decimalByte[i] = strconv.Itoa(i)
	}
	h := uint32(2166136261)
	for _, c := range []byte("([]uint8)[") {
		h = (h ^ uint32(c)) * fnvPrime
	}
	fnvUint8Prefix = h
}

// jsonSafe reports whether encoding/json writes s between quotes unchanged.
func jsonSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// sandboxLabels are the pod's labels plus the three io.kubernetes.pod ones.
func sandboxLabels(pod *corev1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	return l
}

func containerLabels(pod *corev1.Pod, c *corev1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
	}
}

func containerAnnotations(pod *corev1.Pod, c *corev1.Container, restartCount int) map[string]string {
	a := make(map[string]string, len(c.Env)+8)
	a[AnnotationContainerHash] = HashContainer(c)
	a[AnnotationContainerRestartCount] = strconv.Itoa(restartCount)
	a[AnnotationContainerTerminationMessagePath] = c.TerminationMessagePath
	a[AnnotationContainerTerminationMessagePolicy] = string(c.TerminationMessagePolicy)
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if js, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationContainerPreStopHandler] = string(js)
		}
	}
	if len(c.Ports) > 0 {
		if js, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(js)
		}
	}
	return a
}
