package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// certLifetime bounds every certificate the control plane issues. A test
// lasts minutes; a demo cluster may run for days.
const certLifetime = 365 * 24 * time.Hour

// authority is a self-signed CA that issues the API server's serving
// certificate and the clients' certificates (the API server trusts it as its
// client CA).
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

func newAuthority(name string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-signing CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// issue signs a certificate for tmpl's subject, names and usages with a new
// ECDSA key, and returns both in PEM.
func (a *authority) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(certLifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// serving issues the API server's certificate for the given host names and
// addresses.
func (a *authority) serving(dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// client issues a client certificate: the API server takes the common name
// as the user name and the organizations as the groups.
func (a *authority) client(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// serviceAccountKey returns a new RSA key in PEM, which kube-apiserver
// signs service account tokens with and checks them against.
func serviceAccountKey() ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
