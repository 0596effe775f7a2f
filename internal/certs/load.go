package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"pollbal/configs"
	"pollbal/internal/regularfile"
)

// MaxFileSize is the largest certificate or key file read: far above any PEM chain, and small
// enough that a wrong path is refused rather than read whole.
const MaxFileSize = 1 << 20

// Load reads and checks every certificate pair of the configuration: each file must be
// readable PEM, each key must match its certificate, and no certificate may have expired at
// now. It returns every problem at once (one error per problem, errors.Join'ed, each prefixed
// with the pair's path: configs.Problems lists them), or the set.
func Load(list []configs.Certificate, now time.Time) (*Set, error) {
	pairs := make([]tls.Certificate, 0, len(list))
	var errs []error
	for i, c := range list {
		path := fmt.Sprintf("tls.certificates[%d]", i)
		pair, err := loadPair(c, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		pairs = append(pairs, pair)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return newSet(pairs)
}

// loadPair reads one pair. The files are read here rather than by tls.LoadX509KeyPair so that
// a missing file is named as the key it was given under, and so that only a regular file of at
// most MaxFileSize bytes is read: a named pipe in its place would block a reload.
func loadPair(c configs.Certificate, now time.Time) (tls.Certificate, error) {
	certPEM, err := regularfile.Read(c.CertFile, MaxFileSize)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cert_file: %w", err)
	}
	keyPEM, err := regularfile.Read(c.KeyFile, MaxFileSize)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("key_file: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s with %s: %w", c.CertFile, c.KeyFile, err)
	}
	if err := checkValidity(pair, now); err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", c.CertFile, err)
	}
	return pair, nil
}

// checkValidity rejects a leaf certificate that has expired at now: clients would refuse it.
func checkValidity(pair tls.Certificate, now time.Time) error {
	leaf := pair.Leaf
	if leaf == nil {
		return errors.New("no certificate in the file")
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("certificate for %s expired on %s", names(leaf.DNSNames, leaf.Subject.CommonName),
			leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

func names(dns []string, cn string) string {
	switch {
	case len(dns) == 1:
		return dns[0]
	case len(dns) > 1:
		return fmt.Sprintf("%s (and %d more names)", dns[0], len(dns)-1)
	case cn != "":
		return cn
	}
	return "no name"
}

// Version maps tls.min_version to its crypto/tls constant.
func Version(v string) (uint16, error) {
	switch v {
	case configs.TLSVersion12:
		return tls.VersionTLS12, nil
	case configs.TLSVersion13:
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("tls.min_version %q: want %q or %q", v, configs.TLSVersion12, configs.TLSVersion13)
}
