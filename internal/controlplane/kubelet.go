package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The API server's way to the node API (logs, exec, attach, port-forward,
// proxy), as kubeadm sets it up: kube-apiserver authenticates to an agent's
// port with a client certificate of the control plane's CA, for
// KubeletClientUser, who is bound to the built-in ClusterRole
// system:kubelet-api-admin (nodes/proxy, nodes/log, nodes/stats,
// nodes/metrics). An agent that trusts ClientCAFile (its --client-ca-file)
// and authorizes by SubjectAccessReview lets it in. The API server does not
// verify the agent's serving certificate (no --kubelet-certificate-authority),
// as in a cluster where kubelets serve self-signed ones.
const (
	// KubeletClientUser is the user kube-apiserver is towards node APIs.
	KubeletClientUser = "kube-apiserver-kubelet-client"
	// KubeletAPIAdminRole is the ClusterRole KubeletClientUser is bound to.
	KubeletAPIAdminRole = "system:kubelet-api-admin"
	// KubeletPreferredAddressTypes is the order in which kube-apiserver
	// picks a Node's address to reach its node API: the InternalIP an agent
	// reports (--node-ip) first, since the tests' node names resolve to
	// nothing.
	KubeletPreferredAddressTypes = "InternalIP,Hostname"
)

// kubeletClientFlags issues KubeletClientUser's certificate, writes it and
// its key into the control plane's directory and returns the
// kube-apiserver flags that use them.
func (cp *ControlPlane) kubeletClientFlags() (map[string]string, error) {
	certPEM, keyPEM, err := cp.ca.client(KubeletClientUser, nil)
	if err != nil {
		return nil, err
	}
	certFile := filepath.Join(cp.dir, "apiserver-kubelet-client.crt")
	keyFile := filepath.Join(cp.dir, "apiserver-kubelet-client.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	return map[string]string{
		"kubelet-client-certificate":      certFile,
		"kubelet-client-key":              keyFile,
		"kubelet-preferred-address-types": KubeletPreferredAddressTypes,
	}, nil
}

// bindKubeletClient binds KubeletClientUser to KubeletAPIAdminRole, which
// the API server's RBAC bootstrap made before /readyz answered.
func (cp *ControlPlane) bindKubeletClient(ctx context.Context) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: KubeletClientUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: KubeletAPIAdminRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeletClientUser}},
	}
	_, err := cp.AdminClient().RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s to %s: %w", KubeletClientUser, KubeletAPIAdminRole, err)
	}
	return nil
}

// ClientCAFile is the PEM file of the CA that issued every client
// certificate of this control plane (the admin's, the nodes', the API
// server's own towards node APIs): an agent given it as --client-ca-file
// accepts kube-apiserver's requests for logs, exec and port-forward. It is
// removed by Stop.
func (cp *ControlPlane) ClientCAFile() string { return filepath.Join(cp.dir, "ca.crt") }

// UserConfig returns a REST config that authenticates with a new client
// certificate for user in groups, which the API server and an agent
// trusting ClientCAFile both accept; what it may do is RBAC's to say.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	if user == "" {
		return nil, fmt.Errorf("controlplane: UserConfig: empty user name")
	}
	return cp.userConfig(user, groups)
}
