package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"pollbal/configs"
	"pollbal/internal/secretfile"
)

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
		pem, err := os.ReadFile(e.CAFile)
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
		pair, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			var pathErr *os.PathError
			key := "cert_file"
			if errors.As(err, &pathErr) && pathErr.Path == e.KeyFile {
				key = "key_file"
			}
			fail(key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	out.tls = cfg
	return out, problems
}
