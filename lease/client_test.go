package lease_test

import (
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/lease"
)

// A full clientset is a Client; the package itself does not import it, so
// a binary that uses lease does not link every API group's typed client.
var _ lease.Client = kubernetes.Interface(nil)
