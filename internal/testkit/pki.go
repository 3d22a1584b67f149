package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throw-away certificate authority with a server certificate for
// 127.0.0.1 / localhost and a client certificate, written as PEM files.
type PKI struct {
	// CAFile is the CA certificate (PEM).
	CAFile string
	// ServerCert and ServerKey are the server's certificate and key files.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate (for mTLS) and key.
	ClientCert, ClientKey string
	// Pool holds the CA certificate.
	Pool *x509.CertPool
	// Client is the client certificate as a tls.Certificate.
	Client tls.Certificate
}

// NewPKI creates a CA, a server certificate (SANs 127.0.0.1, ::1, localhost)
// and a client certificate (CN "e2e-client") under t.TempDir(); P-256 keys,
// valid for one hour.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "toolplane e2e CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("testkit: CA: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("testkit: CA: %v", err)
	}
	p := &PKI{Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)

	issue := func(name string, serial int64, tmpl *x509.Certificate) (certFile, keyFile string) {
		key := newKey(t)
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = now.Add(-time.Minute)
		tmpl.NotAfter = now.Add(time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("testkit: %s certificate: %v", name, err)
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatalf("testkit: %s key: %v", name, err)
		}
		return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", kb)
	}
	p.ServerCert, p.ServerKey = issue("server", 2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	p.ClientCert, p.ClientKey = issue("client", 3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "e2e-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	p.Client, err = tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatalf("testkit: client key pair: %v", err)
	}
	return p
}

// ClientTLS returns a client config trusting the CA; withCert adds the
// client certificate (mTLS).
func (p *PKI) ClientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{p.Client}
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testkit: key: %v", err)
	}
	return k
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("testkit: write %s: %v", name, err)
	}
	return path
}
