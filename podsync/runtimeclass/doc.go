// Package runtimeclass resolves pods' spec.runtimeClassName to the CRI
// runtime handler their sandboxes run with, as the kubelet's RuntimeClass
// manager: one list-and-watch of the node.k8s.io/v1 RuntimeClasses (which
// the Node authorizer lets a node get, list and watch), kept by client-go's
// reflector as the other caches of nodekit are (internal/listwatch).
//
//	m, _ := runtimeclass.New(runtimeclass.Options{Client: client.RuntimeClasses()})
//	go m.Run(ctx)
//	handler, err := m.LookupRuntimeHandler(ctx, pod.Spec.RuntimeClassName)
//
// The pod half (nodekit.NewPodHalf) builds one, runs it with its other
// parts when its API has a RuntimeClasses client, and gives it to the
// backend (podsync.BackendParts.RuntimeClasses); podsync/cri passes the
// handler to RunPodSandbox.
//
// # Errors
//
// A pod without a runtimeClassName gets the runtime's default handler
// (""). A class that does not exist is the kubelet's NotFound error,
// `runtimeclass.node.k8s.io "name" not found`, which podsync/cri reports
// as the kubelet does: a FailedCreatePodSandBox event "Failed to create
// pod sandbox: ...", the pod Pending and retried. A failing list is "failed
// to lookup RuntimeClass name: ...".
//
// The class's overhead needs nothing here: the API server's RuntimeClass
// admission plugin copies it into spec.overhead when the pod is created,
// and podsync/admission and podsync/cri count spec.overhead.
//
// # Differences from the kubelet
//
//   - A lookup before the first list waits for it (or for its context),
//     where the kubelet's finds nothing and fails the pod until the next
//     sync.
//   - Without an API server (Options.Client nil, a standalone agent) every
//     class is not found, so a pod naming one fails with the kubelet's
//     error; a kubelet without an API client runs it on the default
//     handler.
package runtimeclass
