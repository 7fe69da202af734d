package nodeapi

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The store serves the certificate kept on disk while it is valid, none
// after it expired, and keeps each installed one (mode 0600) and serves it.
func TestServingCertificatesKeepsAndLoads(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := t.TempDir()
	c, err := selfSignedIn(src, []string{"n1"}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(filepath.Join(src, "kubelet.crt"))
	keyPEM, _ := os.ReadFile(filepath.Join(src, "kubelet.key"))
	dir := t.TempDir()
	s, err := NewServingCertificates(ServingCSROptions{Clock: clocktesting.NewFakeClock(now)}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Current() != nil {
		t.Fatal("a certificate served before any was kept")
	}
	if err := s.install(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if got := s.Current(); got == nil || got.Leaf == nil || got.Leaf.SerialNumber.Cmp(leaf(t, c.Certificate[0]).SerialNumber) != 0 {
		t.Fatalf("after install: %v", got)
	}
	fi, err := os.Stat(filepath.Join(dir, ServingStoreFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept file: %v %v", fi, err)
	}
	again, _ := NewServingCertificates(ServingCSROptions{Clock: clocktesting.NewFakeClock(now)}, dir)
	if again.Current() == nil {
		t.Error("the kept certificate was not loaded")
	}
	expired, _ := NewServingCertificates(ServingCSROptions{Clock: clocktesting.NewFakeClock(again.Current().Leaf.NotAfter.Add(time.Second))}, dir)
	if expired.Current() != nil {
		t.Error("an expired kept certificate was served")
	}
	if err := s.install([]byte("junk"), keyPEM); err == nil {
		t.Error("junk installed")
	}
	if _, err := NewServingCertificates(ServingCSROptions{}, ""); err == nil {
		t.Error("no directory: no error")
	}
}

func leaf(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
