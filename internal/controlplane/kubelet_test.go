package controlplane_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/controlplane"
)

// The API server's user towards node APIs may use every node API
// subresource a kubelet authorizes (by the control plane's binding to
// system:kubelet-api-admin); a user with a certificate of the same CA and
// no binding may not; ClientCAFile holds the CA that issued both.
func TestKubeletClientAuthorized(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := cp.AdminClient()
	can := func(user, verb, sub string) bool {
		t.Helper()
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Version: "v1", Resource: "nodes", Subresource: sub, Name: "any-node"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, sub := range []string{"proxy", "log", "stats", "metrics"} {
		for _, verb := range []string{"get", "create"} {
			if !can(controlplane.KubeletClientUser, verb, sub) {
				t.Errorf("%s may not %s nodes/%s", controlplane.KubeletClientUser, verb, sub)
			}
			if can("somebody-else", verb, sub) {
				t.Errorf("an unbound user may %s nodes/%s", verb, sub)
			}
		}
	}

	pemBytes, err := os.ReadFile(cp.ClientCAFile())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("%s: no PEM block", cp.ClientCAFile())
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cfg, err := cp.UserConfig("somebody-else", "some-group")
	if err != nil {
		t.Fatal(err)
	}
	block, _ = pem.Decode(cfg.CertData)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a UserConfig certificate does not verify against ClientCAFile: %v", err)
	}
	if leaf.Subject.CommonName != "somebody-else" || len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != "some-group" {
		t.Errorf("UserConfig certificate subject %v", leaf.Subject)
	}
	if _, err := cp.UserConfig(""); err == nil {
		t.Errorf("UserConfig with no user name: no error")
	}
}
