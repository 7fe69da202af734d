package nodeapi_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// csrServer is a fake API server's CSRs: creates get a name, and the test
// plays approver and signer.
func csrServer() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		if obj.Name == "" {
			obj.Name = obj.GenerateName + "1"
		}
		return false, nil, nil
	})
	return cs
}

// The request is what the kubelet-serving signer accepts (the node's
// subject, its names, digital signature and server auth); the pair comes
// back once the certificate is in the request's status, read every
// PollInterval on the clock.
func TestRequestServingCertificate(t *testing.T) {
	cs := csrServer()
	csrs := cs.CertificatesV1().CertificateSigningRequests()
	clk := clocktesting.NewFakeClock(t0)
	ca := newTestCA(t, "cluster")
	type result struct {
		cert, key []byte
		err       error
	}
	done := make(chan result, 1)
	go func() {
		c, k, err := nodeapi.RequestServingCertificate(context.Background(), nodeapi.ServingCSROptions{
			CSRs: csrs, NodeName: "node-1", Hostnames: []string{"node-1"}, IPs: []net.IP{net.IPv4(192, 0, 2, 7)}, Clock: clk})
		done <- result{c, k, err}
	}()
	var csr *certificatesv1.CertificateSigningRequest
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the request created and polled", func() bool {
		var err error
		csr, err = csrs.Get(context.Background(), "csr-1", metav1.GetOptions{})
		return err == nil && clk.HasWaiters()
	})
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName ||
		!slices.Equal(csr.Spec.Usages, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}) {
		t.Errorf("request spec: signer %q usages %v", csr.Spec.SignerName, csr.Spec.Usages)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		t.Fatalf("request PEM %q", csr.Spec.Request)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if req.Subject.CommonName != "system:node:node-1" || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) ||
		!slices.Equal(req.DNSNames, []string{"node-1"}) || len(req.IPAddresses) != 1 || !req.IPAddresses[0].Equal(net.IPv4(192, 0, 2, 7)) {
		t.Errorf("request subject %v, DNS %v, IPs %v", req.Subject, req.DNSNames, req.IPAddresses)
	}

	// Not issued yet: a poll finds nothing and waits again.
	clk.Step(nodeapi.DefaultCSRPollInterval)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the next poll's wait", clk.HasWaiters)
	select {
	case r := <-done:
		t.Fatalf("returned before the certificate was issued: %v", r.err)
	default:
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(9), Subject: req.Subject,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses, NotBefore: t0, NotAfter: t0.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if _, err := csrs.UpdateStatus(context.Background(), csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(nodeapi.DefaultCSRPollInterval)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if string(r.cert) != string(csr.Status.Certificate) || !strings.Contains(string(r.key), "PRIVATE KEY") {
		t.Errorf("returned certificate %q, key %q", r.cert, r.key)
	}
}

// A denied request is an error wrapping ErrCSRDenied; bad options are
// errors naming the field.
func TestRequestServingCertificateDeniedAndOptions(t *testing.T) {
	cs := csrServer()
	csrs := cs.CertificatesV1().CertificateSigningRequests()
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest).DeepCopy()
		obj.Name = "csr-denied"
		obj.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NotToday", Message: "no"}}
		return true, obj, nil
	})
	_, _, err := nodeapi.RequestServingCertificate(context.Background(), nodeapi.ServingCSROptions{CSRs: csrs, NodeName: "n", Hostnames: []string{"n"}})
	if !errors.Is(err, nodeapi.ErrCSRDenied) || !strings.Contains(err.Error(), "NotToday") {
		t.Errorf("denied: %v, want ErrCSRDenied with the reason", err)
	}
	for want, o := range map[string]nodeapi.ServingCSROptions{
		"CSRs":         {NodeName: "n", Hostnames: []string{"n"}},
		"NodeName":     {CSRs: csrs, Hostnames: []string{"n"}},
		"Hostnames":    {CSRs: csrs, NodeName: "n"},
		"PollInterval": {CSRs: csrs, NodeName: "n", Hostnames: []string{"n"}, PollInterval: time.Nanosecond},
	} {
		if _, _, err := nodeapi.RequestServingCertificate(context.Background(), o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("options without a good %s: %v", want, err)
		}
	}
}
