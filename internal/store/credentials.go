package store

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"pollbal/configs"
	"pollbal/internal/regularfile"
	"pollbal/internal/secretfile"
)

// maxPEMSize is the largest CA, certificate or key file read for etcd: far above any PEM chain,
// and small enough that a wrong path is refused rather than read whole.
const maxPEMSize = 1 << 20

// credentials are what the files of admin.store.etcd hold.
type credentials struct {
	password string      // "" without username
	tls      *tls.Config // nil without ca_file and cert_file
}

// CheckEtcdFiles reads the files admin.store.etcd names, as New does, and returns every
// problem, one per file, each prefixed with its key (pollbal check).
func CheckEtcdFiles(e *configs.Etcd) []string {
	_, problems := loadCredentials(e)
	return problems
}

// loadCredentials reads the files admin.store.etcd names and returns every problem, one per
// file, each prefixed with its key.
func loadCredentials(e *configs.Etcd) (credentials, []string) {
	var out credentials
	var problems []string
	fail := func(key string, err error) {
		problems = append(problems, "admin.store.etcd."+key+": "+err.Error())
	}
	if e.PasswordFile != "" {
		p, err := secretfile.Read(e.PasswordFile)
		if err != nil {
			fail("password_file", err)
		}
		out.password = string(p)
	}
	if !e.TLS() {
		return out, problems
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.CAFile != "" {
		pem, err := regularfile.Read(e.CAFile, maxPEMSize)
		if err == nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				err = fmt.Errorf("%s holds no PEM certificate", e.CAFile)
			}
			cfg.RootCAs = pool
		}
		if err != nil {
			fail("ca_file", err)
		}
	}
	if e.CertFile != "" {
		pair, key, err := loadPair(e.CertFile, e.KeyFile)
		if err != nil {
			fail(key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	out.tls = cfg
	return out, problems
}

// loadPair reads the client certificate and key, as tls.LoadX509KeyPair would but only from
// regular files of at most maxPEMSize bytes (a named pipe would block a reload), and names the
// key of the file a problem is about.
func loadPair(certFile, keyFile string) (pair tls.Certificate, key string, err error) {
	certPEM, err := regularfile.Read(certFile, maxPEMSize)
	if err != nil {
		return tls.Certificate{}, "cert_file", err
	}
	keyPEM, err := regularfile.Read(keyFile, maxPEMSize)
	if err != nil {
		return tls.Certificate{}, "key_file", err
	}
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	return pair, "cert_file", err
}
