package controlplane

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
)

// Signer is kube-controller-manager running only its CSR signing
// controller: approved CertificateSigningRequests of the kubernetes.io
// signers (kubelet-serving among them) get a certificate of the control
// plane's CA, so a serving certificate an agent requests verifies against
// ClientCAFile. Nothing approves requests: a test does, as an operator or
// an approver would for kubelet-serving.
type Signer struct{ p *process }

// StartSigner starts the signer (kube-controller-manager from BinaryDir).
// It serves no port and is not waited on:
// the certificate of an approved request is what shows it works. Stop it
// with Signer.Stop (ControlPlane.Stop does not).
func (cp *ControlPlane) StartSigner() (*Signer, error) {
	binDir, err := BinaryDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(binDir, "kube-controller-manager")); err != nil {
		return nil, fmt.Errorf("%w: kube-controller-manager not found in %s", ErrUnavailable, binDir)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cp.ca.key)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(cp.dir, "ca.key")
	if err := os.WriteFile(keyFile, pemBlock("PRIVATE KEY", keyDER), 0o600); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(cp.dir, "signer.kubeconfig")
	if err := WriteKubeconfig(cp.admin, kubeconfig); err != nil {
		return nil, err
	}
	p := newProcess(binDir, cp.dir, "kube-controller-manager", []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=csrsigning",
		"--cluster-signing-cert-file=" + cp.ClientCAFile(),
		"--cluster-signing-key-file=" + keyFile,
		"--leader-elect=false",
		"--secure-port=0",
	})
	if err := p.start(); err != nil {
		return nil, err
	}
	return &Signer{p: p}, nil
}

// Stop stops the signer (SIGTERM, then SIGKILL after a few seconds). It may
// be called more than once.
func (s *Signer) Stop() error { return s.p.stop(stopGrace) }

// Exited returns an error with the end of the signer's log once it has
// exited, nil while it runs.
func (s *Signer) Exited() error { return s.p.exited() }
