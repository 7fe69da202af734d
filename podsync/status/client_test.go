package status_test

import (
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodekit/nodekit/podsync/status"
)

// client-go's typed pod client is a status.PodClient with no adapter.
var _ status.PodClient = (typedcorev1.PodInterface)(nil)
