package nodeapi_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	var n atomic.Int32
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		if obj.Name == "" {
			obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, n.Add(1))
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

// signCSR issues the request as the signer would, valid from notBefore for
// life.
func signCSR(t *testing.T, ca *testCA, csr *certificatesv1.CertificateSigningRequest, notBefore time.Time, life time.Duration) []byte {
	t.Helper()
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		t.Fatalf("request PEM %q", csr.Spec.Request)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(notBefore.Unix()), Subject: req.Subject,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses, NotBefore: notBefore, NotAfter: notBefore.Add(life),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// RenewServingCertificate requests a certificate at once when there is
// none; renews it at the point drawn in its validity (70% + 20% of Rand's
// 0.5: 80%), not before; after a denied request asks again 1s later; and
// serves the old certificate until a new one is issued.
func TestRenewServingCertificate(t *testing.T) {
	cs := csrServer()
	csrs := cs.CertificatesV1().CertificateSigningRequests()
	clk := clocktesting.NewFakeClock(t0)
	ca := newTestCA(t, "cluster")
	var mu sync.Mutex
	var cur *x509.Certificate
	installed := make(chan *x509.Certificate, 10)
	current := func() *x509.Certificate {
		mu.Lock()
		defer mu.Unlock()
		return cur
	}
	install := func(certPEM, _ []byte) error {
		block, _ := pem.Decode(certPEM)
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return err
		}
		mu.Lock()
		cur = leaf
		mu.Unlock()
		installed <- leaf
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- nodeapi.RenewServingCertificate(ctx, nodeapi.ServingCSROptions{CSRs: csrs, NodeName: "node-1", Hostnames: []string{"node-1"},
			Clock: clk, Rand: func() float64 { return 0.5 }}, current, install)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RenewServingCertificate: %v", err)
		}
	}()
	get := func(name string) *certificatesv1.CertificateSigningRequest {
		csr, err := csrs.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return csr
	}
	waiting := func(what string) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, time.Millisecond, what, clk.HasWaiters)
	}
	answer := func(name string, set func(*certificatesv1.CertificateSigningRequest)) {
		t.Helper()
		var csr *certificatesv1.CertificateSigningRequest
		testenv.Eventually(t, 10*time.Second, time.Millisecond, name+" created", func() bool {
			csr = get(name)
			return csr != nil
		})
		set(csr)
		if _, err := csrs.UpdateStatus(context.Background(), csr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nextInstalled := func() *x509.Certificate {
		t.Helper()
		select {
		case c := <-installed:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no certificate installed")
			return nil
		}
	}

	// No certificate: requested at once, issued for 100s.
	answer("csr-1", func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Certificate = signCSR(t, ca, c, t0, 100*time.Second)
	})
	waiting("the first poll")
	clk.Step(nodeapi.DefaultCSRPollInterval)
	if c := nextInstalled(); !c.NotBefore.Equal(t0) {
		t.Fatalf("installed a certificate from %v; want %v", c.NotBefore, t0)
	}
	// Renewed at 80s, not at 79s.
	waiting("the renewal timer")
	clk.Step(78 * time.Second) // t0+79s
	waiting("the renewal timer, still")
	if get("csr-2") != nil {
		t.Fatal("renewed at 79% of the validity; want 80%")
	}
	clk.Step(time.Second)
	// Denied: asked again 1s later; the first certificate is served on.
	answer("csr-2", func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "No"}}
	})
	waiting("the poll of csr-2")
	clk.Step(nodeapi.DefaultCSRPollInterval)
	waiting("the wait after the denial")
	if get("csr-3") != nil {
		t.Fatal("asked again at once after a denial")
	}
	if c := current(); c == nil || !c.NotBefore.Equal(t0) {
		t.Errorf("serving %v after a denied renewal; want the first certificate", c)
	}
	clk.Step(nodeapi.RenewRetryFirst)
	renewed := clk.Now()
	answer("csr-3", func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Certificate = signCSR(t, ca, c, renewed, 100*time.Second)
	})
	waiting("the poll of csr-3")
	clk.Step(nodeapi.DefaultCSRPollInterval)
	if c := nextInstalled(); !c.NotBefore.Equal(renewed) {
		t.Errorf("installed a certificate from %v; want the renewed one from %v", c.NotBefore, renewed)
	}
}
