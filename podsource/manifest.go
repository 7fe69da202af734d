package podsource

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// MaxManifestBytes is the largest manifest accepted, file or URL body (10 MiB,
// as kubelet).
const MaxManifestBytes = 10 << 20

// MaxExpandedManifestBytes bounds a manifest once its YAML aliases are
// expanded, as the conversion to JSON expands them: 10 MiB, the input's own
// limit. Beyond kubelet, which has no such bound: a 1 MiB manifest whose
// large string is anchored once and referenced 200 times passes the YAML
// decoder's alias limits and would take some 600 MiB of heap to decode. The
// size, the bytes of the scalars plus one per node, is counted on the parsed
// document, each anchor once, before anything is expanded; a document
// without aliases never counts more than about its own length.
const MaxExpandedManifestBytes = MaxManifestBytes

// ErrInvalidManifest is wrapped by every *ManifestError, so
// errors.Is(err, ErrInvalidManifest) tells a rejected manifest from other
// failures (unreadable directory, network error).
var ErrInvalidManifest = errors.New("invalid manifest")

// Origin says where a static pod manifest came from. It takes part in the
// pod's UID and annotations.
type Origin struct {
	// Source is FileSource or HTTPSource (or a caller's own source name). Only
	// FileSource pods get the Exists:NoExecute toleration.
	Source string
	// Location is the file path or the URL.
	Location string
	// NodeName is the node the pod is for. Required; taken through
	// CanonicalNodeName, so "Node-1" means "node-1".
	NodeName string
}

// ManifestError is a manifest that could not be used: unreadable, not a pod,
// or invalid. Its message names the source, the file or URL, and the field:
//
//	podsource: file /etc/kubernetes/manifests/web.yaml: spec.containers[1].name: Duplicate value: "app"
type ManifestError struct {
	// Source and Location are those of the manifest's Origin.
	Source, Location string
	// Fields holds validation failures, each naming a field. Empty when Err is set.
	Fields field.ErrorList
	// Err is a read or decode failure.
	Err error
}

func (e *ManifestError) Error() string {
	var b strings.Builder
	b.WriteString("podsource: ")
	b.WriteString(e.Source)
	b.WriteString(" ")
	b.WriteString(e.Location)
	b.WriteString(": ")
	switch {
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	case len(e.Fields) == 1:
		b.WriteString(e.Fields[0].Error())
	default:
		for i, fe := range e.Fields {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(fe.Error())
		}
	}
	return b.String()
}

// Unwrap returns ErrInvalidManifest and the underlying error (the decode
// failure, or the field errors as an aggregate).
func (e *ManifestError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidManifest, e.Err}
	}
	return []error{ErrInvalidManifest, e.Fields.ToAggregate()}
}

// canonical returns the origin with its node name through CanonicalNodeName.
func (o Origin) canonical() (Origin, error) {
	n, err := CanonicalNodeName(o.NodeName)
	if err != nil {
		return o, o.errorf("node name: %w", err)
	}
	o.NodeName = n
	return o, nil
}

func (o Origin) errorf(format string, args ...any) *ManifestError {
	return &ManifestError{Source: o.Source, Location: o.Location, Err: fmt.Errorf(format, args...)}
}

// DecodeManifest decodes one static pod from YAML or JSON (a Pod, apiVersion
// v1), applies API defaults (SetPodDefaults) and static pod defaults, and
// validates it (ValidateStaticPod). Any rejection is a *ManifestError.
//
// Static pod defaults, as kubelet: the UID, unless metadata.uid is given, is
// a hash (FNV-128a, hex) over the defaulted pod, the node name and the
// origin's location, so the same content gives the same UID and changed
// content a new one; the name becomes "<name>-<node>"; the namespace
// "default" when empty; spec.nodeName the node (every node name in this
// package goes through CanonicalNodeName, so it is lower-case); annotations
// kubernetes.io/config.hash (the UID) and kubernetes.io/config.source; the
// Exists:NoExecute toleration for FileSource; status.phase Pending. The
// kubernetes.io/config.seen annotation is added by the Merger.
func DecodeManifest(data []byte, origin Origin) (*v1.Pod, error) {
	origin, err := origin.canonical()
	if err != nil {
		return nil, err
	}
	js, err := toJSON(data, origin)
	if err != nil {
		return nil, err
	}
	if err := checkKind(js, "Pod", origin, nil); err != nil {
		return nil, err
	}
	return decodePod(js, origin, nil)
}

// DecodeManifestList decodes what a manifest URL may serve: one Pod, a
// PodList, or a v1 List of Pods. Each pod is defaulted and validated as by
// DecodeManifest; one bad pod rejects the whole document, with the field path
// starting at items[i].
func DecodeManifestList(data []byte, origin Origin) ([]*v1.Pod, error) {
	origin, err := origin.canonical()
	if err != nil {
		return nil, err
	}
	js, err := toJSON(data, origin)
	if err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := utiljson.Unmarshal(js, &tm); err != nil {
		return nil, origin.errorf("not a Kubernetes object: %w", err)
	}
	switch tm.Kind {
	case "Pod":
		if err := checkKind(js, "Pod", origin, nil); err != nil {
			return nil, err
		}
		pod, err := decodePod(js, origin, nil)
		if err != nil {
			return nil, err
		}
		return []*v1.Pod{pod}, nil
	case "PodList", "List":
		if tm.APIVersion != "v1" {
			return nil, origin.errorf("apiVersion %q: want \"v1\"", tm.APIVersion)
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := utiljson.Unmarshal(js, &list); err != nil {
			return nil, origin.errorf("decoding %s: %w", tm.Kind, err)
		}
		pods := make([]*v1.Pod, 0, len(list.Items))
		for i, item := range list.Items {
			path := field.NewPath("items").Index(i)
			if tm.Kind == "List" {
				if err := checkKind(item, "Pod", origin, path); err != nil {
					return nil, err
				}
			}
			pod, err := decodePod(item, origin, path)
			if err != nil {
				return nil, err
			}
			pods = append(pods, pod)
		}
		return pods, nil
	case "":
		return nil, origin.errorf("kind: Required value: want Pod, PodList or List")
	default:
		return nil, origin.errorf("kind %q: want Pod, PodList or List", tm.Kind)
	}
}

func toJSON(data []byte, origin Origin) (js []byte, err error) {
	if len(data) > MaxManifestBytes {
		return nil, origin.errorf("manifest is %d bytes, more than the %d allowed", len(data), MaxManifestBytes)
	}
	defer func() {
		// The YAML parser must not take the process down on hostile input.
		if r := recover(); r != nil {
			js, err = nil, origin.errorf("YAML parser failed: %v", r)
		}
	}()
	n, counted := expandedSize(data, MaxExpandedManifestBytes)
	if counted && n > MaxExpandedManifestBytes {
		return nil, origin.errorf("manifest of %d bytes expands to more than %d through YAML aliases", len(data), MaxExpandedManifestBytes)
	}
	js, err = yaml.YAMLToJSON(data)
	if err != nil {
		return nil, origin.errorf("not YAML or JSON: %w", err)
	}
	if !counted && len(js) > 3*MaxExpandedManifestBytes {
		// The size could not be counted before (see expandedSize): bound the
		// JSON, loosely, as quotes and commas may triple a document of tiny
		// scalars.
		return nil, origin.errorf("manifest of %d bytes expands to %d bytes of JSON, more than %d", len(data), len(js), 3*MaxExpandedManifestBytes)
	}
	if len(js) == 0 || string(js) == "null" {
		return nil, origin.errorf("empty manifest")
	}
	if js[0] != '{' {
		what := "a single value"
		if js[0] == '[' {
			what = "a list"
		}
		return nil, origin.errorf("not an object (a Pod or a PodList) but %s; it begins %q", what, beginning(data))
	}
	return js, nil
}

// beginning is data's first non-blank line, cut to 40 bytes: enough to
// tell an HTML page or a log from a manifest in an error message.
func beginning(data []byte) string {
	line := bytes.TrimSpace(data)
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = bytes.TrimSpace(line[:i])
	}
	if len(line) > 40 {
		return string(line[:40]) + "..."
	}
	return string(line)
}

// expandedSize counts the size of data's first document with every alias
// expanded: the bytes of its scalars plus one per node, which for a
// document without aliases is at most about its length (scalars are no
// longer than their source). It stops as soon as the count passes limit,
// returning limit+1. Each anchored node is sized once, so a chain of
// aliases costs no more than the document. ok is false when data does not
// parse here; YAMLToJSON then reports the error, or its output is bounded
// after the fact. A document without '*' has no aliases and is counted as
// its length.
func expandedSize(data []byte, limit int) (n int, ok bool) {
	if bytes.IndexByte(data, '*') < 0 {
		return len(data), true
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return 0, false
	}
	s := sizer{limit: limit, memo: map[*yamlv3.Node]int{}}
	return s.size(&doc), true
}

type sizer struct {
	limit int
	memo  map[*yamlv3.Node]int // anchored nodes; -1 while being sized
}

func (s *sizer) size(n *yamlv3.Node) int {
	if n == nil {
		return 0
	}
	if n.Anchor != "" {
		if v, ok := s.memo[n]; ok {
			if v < 0 { // an alias inside its own anchor
				return s.limit + 1
			}
			return v
		}
		s.memo[n] = -1
	}
	total := 0
	add := func(k int) bool {
		total += k
		if total > s.limit {
			total = s.limit + 1
			return false
		}
		return true
	}
	switch n.Kind {
	case yamlv3.ScalarNode:
		add(len(n.Value) + 1)
	case yamlv3.AliasNode:
		add(s.size(n.Alias))
	default: // document, sequence, mapping
		add(1)
		for _, c := range n.Content {
			if !add(s.size(c)) {
				break
			}
		}
	}
	if n.Anchor != "" {
		s.memo[n] = total
	}
	return total
}

func checkKind(js []byte, kind string, origin Origin, path *field.Path) error {
	var tm metav1.TypeMeta
	if err := utiljson.Unmarshal(js, &tm); err != nil {
		return origin.errorf("%snot a Kubernetes object: %w", prefix(path), err)
	}
	if tm.Kind != kind {
		if tm.Kind == "" {
			return origin.errorf("%skind: Required value: want %q", prefix(path), kind)
		}
		return origin.errorf("%skind %q: want %q", prefix(path), tm.Kind, kind)
	}
	if tm.APIVersion != "v1" {
		return origin.errorf("%sapiVersion %q: want \"v1\"", prefix(path), tm.APIVersion)
	}
	return nil
}

func prefix(path *field.Path) string {
	if path == nil {
		return ""
	}
	return path.String() + ": "
}

func decodePod(js []byte, origin Origin, path *field.Path) (*v1.Pod, error) {
	pod := &v1.Pod{}
	if err := utiljson.Unmarshal(js, pod); err != nil {
		return nil, origin.errorf("%sdecoding Pod: %w", prefix(path), err)
	}
	meta := path.Child("metadata")
	if pod.Name == "" {
		return nil, &ManifestError{Source: origin.Source, Location: origin.Location,
			Fields: field.ErrorList{field.Required(meta.Child("name"), "a static pod needs a name")}}
	}
	// Server-set fields mean nothing in a manifest.
	pod.ResourceVersion = ""
	pod.Generation = 0
	pod.ManagedFields = nil
	SetPodDefaults(pod)
	if pod.UID == "" {
		pod.UID = staticPodUID(pod, origin)
	}
	applyStaticDefaults(pod, origin)
	if errs := validateStaticPod(pod, path); len(errs) > 0 {
		return nil, &ManifestError{Source: origin.Source, Location: origin.Location, Fields: errs}
	}
	return pod, nil
}

// staticPodUID hashes the defaulted pod (before the static pod defaults), the
// node and the location.
func staticPodUID(pod *v1.Pod, origin Origin) types.UID {
	h := fnv.New128a()
	js, err := utiljson.Marshal(pod)
	if err != nil {
		// A decoded pod always marshals; fall back to its printed form.
		js = []byte(pod.String())
	}
	h.Write(js)
	fmt.Fprintf(h, "host:%s", origin.NodeName)
	if origin.Source == FileSource {
		fmt.Fprintf(h, "file:%s", origin.Location)
	} else {
		fmt.Fprintf(h, "%s:%s", origin.Source, origin.Location)
	}
	return types.UID(hex.EncodeToString(h.Sum(nil)))
}

func applyStaticDefaults(pod *v1.Pod, origin Origin) {
	pod.Name = pod.Name + "-" + origin.NodeName
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = origin.NodeName
	if pod.Annotations == nil {
		pod.Annotations = make(map[string]string, 3)
	}
	pod.Annotations[ConfigHashAnnotation] = string(pod.UID)
	pod.Annotations[ConfigSourceAnnotation] = origin.Source
	if origin.Source == FileSource {
		addToleration(pod, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	}
	pod.Status.Phase = v1.PodPending
}

func addToleration(pod *v1.Pod, t v1.Toleration) {
	for i := range pod.Spec.Tolerations {
		have := &pod.Spec.Tolerations[i]
		if have.MatchToleration(&t) {
			if have.Value == t.Value && equalInt64Ptr(have.TolerationSeconds, t.TolerationSeconds) {
				return
			}
			pod.Spec.Tolerations[i] = t
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}

func equalInt64Ptr(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
