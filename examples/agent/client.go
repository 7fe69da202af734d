package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// nodeClientset is a kubernetes.Interface that serves only the API groups a
// node agent uses: core/v1 (nodes, pods, events) and coordination.k8s.io/v1
// (leases). Any other group's method panics (the embedded Interface is nil).
//
// It exists for footprint: kubernetes.NewForConfig links the typed clients
// of every API group into the binary, and each page of code the process
// touches counts in its resident set. Building only the two groups' clients
// keeps that code out.
type nodeClientset struct {
	kubernetes.Interface // nil: groups the agent does not use
	core                 corev1.CoreV1Interface
	coordination         coordinationv1.CoordinationV1Interface
}

func (c *nodeClientset) CoreV1() corev1.CoreV1Interface { return c.core }

func (c *nodeClientset) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return c.coordination
}

// newNodeClientset builds the two groups' clients on one HTTP client, so
// they share connections.
func newNodeClientset(cfg *rest.Config) (*nodeClientset, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	core, err := corev1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	coord, err := coordinationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return &nodeClientset{core: core, coordination: coord}, nil
}
