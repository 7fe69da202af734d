package podsource

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Source names, as kubelet spells them. They are the values of the
// kubernetes.io/config.source annotation.
const (
	// FileSource names pods read from a manifest directory or file.
	FileSource = "file"
	// HTTPSource names pods read from a manifest URL.
	HTTPSource = "http"
	// APISource names pods bound to the node in the API server.
	APISource = "api"
)

// Annotation keys that kubelet and nodekit put on pods.
const (
	// ConfigSourceAnnotation names the source a pod came from: "file", "http" or "api".
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	// ConfigHashAnnotation holds a static pod's UID, which follows its content.
	ConfigHashAnnotation = "kubernetes.io/config.hash"
	// ConfigSeenAnnotation holds the time (RFC 3339, nanoseconds) the merger first saw the pod.
	ConfigSeenAnnotation = "kubernetes.io/config.seen"
	// ConfigMirrorAnnotation marks a mirror pod; its value is the static pod's config hash.
	ConfigMirrorAnnotation = v1.MirrorPodAnnotationKey
)

// Op says what an Update means.
type Op int

// The operations. Sources send only OpSet; the merger turns each SET into the
// others.
const (
	// OpSet is a source's full set of pods: any pod it sent before and does not
	// send now is gone.
	OpSet Op = iota
	// OpAdd carries pods new to their source.
	OpAdd
	// OpUpdate carries pods whose spec, labels, non-local annotations or
	// deletion grace period changed.
	OpUpdate
	// OpDelete carries pods whose graceful deletion began (deletionTimestamp set).
	OpDelete
	// OpRemove carries pods gone from their source's set.
	OpRemove
	// OpReconcile carries pods whose status alone changed.
	OpReconcile
)

// String returns kubelet's name for the operation: SET, ADD, UPDATE, DELETE,
// REMOVE or RECONCILE.
func (o Op) String() string {
	switch o {
	case OpSet:
		return "SET"
	case OpAdd:
		return "ADD"
	case OpUpdate:
		return "UPDATE"
	case OpDelete:
		return "DELETE"
	case OpRemove:
		return "REMOVE"
	case OpReconcile:
		return "RECONCILE"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Update is one message on a pod stream: from a source to the merger (always
// OpSet), or from the merger to its consumer (every other Op). Pods is never
// nil in what nodekit sends.
type Update struct {
	Op     Op
	Source string
	Pods   []*v1.Pod
}

// PodSource is a source of the pods this node should run.
//
// Run sends the source's full set of pods (an Update with Op OpSet) each time
// it changes, the first time as soon as it is known (even when empty), until
// ctx ends; it then returns nil. It returns an error only when it cannot run
// at all. Every send must also select on ctx.Done(). Pods sent must not be
// modified afterwards by the source; receivers must not modify them either.
type PodSource interface {
	// Name is the source's name, used as the Update's Source and the pods'
	// kubernetes.io/config.source annotation: FileSource, HTTPSource,
	// APISource, or a name of the caller's choosing.
	Name() string
	// Run sends full sets into updates until ctx ends.
	Run(ctx context.Context, updates chan<- Update) error
}

// SourceFunc adapts a function to PodSource under the given name.
func SourceFunc(name string, run func(ctx context.Context, updates chan<- Update) error) PodSource {
	return sourceFunc{name: name, run: run}
}

type sourceFunc struct {
	name string
	run  func(ctx context.Context, updates chan<- Update) error
}

func (s sourceFunc) Name() string { return s.name }

func (s sourceFunc) Run(ctx context.Context, updates chan<- Update) error {
	if s.run == nil {
		<-ctx.Done()
		return nil
	}
	return s.run(ctx, updates)
}

var _ PodSource = sourceFunc{}

// FullName is kubelet's full pod name, "<name>_<namespace>", unique on a node.
func FullName(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace
}

// IsStaticPod reports whether the pod came from a source other than the API
// server, by its kubernetes.io/config.source annotation.
func IsStaticPod(pod *v1.Pod) bool {
	src, ok := pod.Annotations[ConfigSourceAnnotation]
	return ok && src != APISource
}

// IsMirrorPod reports whether the pod is a mirror pod (it carries the
// kubernetes.io/config.mirror annotation).
func IsMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[ConfigMirrorAnnotation]
	return ok
}

// send delivers u unless ctx ends first.
func send(ctx context.Context, updates chan<- Update, u Update) error {
	select {
	case updates <- u:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
