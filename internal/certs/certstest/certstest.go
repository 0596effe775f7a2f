// Package certstest makes certificates for tests: self-signed ECDSA pairs written as PEM files.
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Pair is a certificate and key written to files.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// Options describe a certificate; the zero value is valid for an hour from now.
type Options struct {
	NotBefore, NotAfter time.Time
}

// Write makes a self-signed ECDSA P-256 certificate for names (DNS names; the first is also the
// subject's common name) and writes it and its key under dir as <stem>.crt and <stem>.key.
func Write(t testing.TB, dir, stem string, o Options, names ...string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Minute)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(time.Hour)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		NotBefore:             o.NotBefore,
		NotAfter:              o.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(dir, stem+".crt"), KeyFile: filepath.Join(dir, stem+".key"), Cert: cert}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	writePEM(t, p.KeyFile, "PRIVATE KEY", keyDER)
	return p
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Pool returns a certificate pool holding the given (self-signed) certificates, for clients.
func Pool(pairs ...Pair) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, p := range pairs {
		pool.AddCert(p.Cert)
	}
	return pool
}
