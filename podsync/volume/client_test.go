package volume_test

import (
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodekit/nodekit/podsync/volume"
)

// client-go's typed clients are the Manager's clients, with no adapter.
var (
	_ volume.SecretClient         = (typedcorev1.SecretInterface)(nil)
	_ volume.ConfigMapClient      = (typedcorev1.ConfigMapInterface)(nil)
	_ volume.ServiceClient        = (typedcorev1.ServiceInterface)(nil)
	_ volume.ServiceAccountClient = (typedcorev1.ServiceAccountInterface)(nil)
)
