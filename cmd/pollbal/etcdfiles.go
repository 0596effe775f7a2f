package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"pollbal/configs"
)

// etcdCredentials is what the files of admin.store.etcd hold.
type etcdCredentials struct {
	password string      // "" without username
	tls      *tls.Config // nil without ca_file and cert_file
}

// loadEtcdFiles reads the files admin.store.etcd names and returns every problem, one per
// file, each prefixed with its key.
func loadEtcdFiles(e *configs.Etcd) (etcdCredentials, []string) {
	var out etcdCredentials
	var problems []string
	fail := func(key string, err error) {
		problems = append(problems, "admin.store.etcd."+key+": "+err.Error())
	}
	if e.PasswordFile != "" {
		data, err := os.ReadFile(e.PasswordFile)
		switch {
		case err != nil:
			fail("password_file", err)
		case strings.TrimSpace(string(data)) == "":
			fail("password_file", fmt.Errorf("%s is empty", e.PasswordFile))
		default:
			out.password = strings.TrimSpace(string(data))
		}
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
