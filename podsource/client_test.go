package podsource_test

import (
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodekit/nodekit/podsource"
)

// client-go's typed clients are the package's clients, with no adapter.
var (
	_ podsource.APIPodClient    = (typedcorev1.PodInterface)(nil)
	_ podsource.MirrorPodClient = (typedcorev1.PodInterface)(nil)
	_ podsource.NodeClient      = (typedcorev1.NodeInterface)(nil)
)
