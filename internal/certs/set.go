package certs

import (
	"crypto/tls"
	"errors"
	"strings"
)

// Set is a loaded list of certificates with its SNI index. It is immutable once built and
// safe for concurrent use.
type Set struct {
	pairs    []tls.Certificate
	exact    map[string]int // lower-case DNS name → index of the first pair naming it
	wildcard map[string]int // "example.com" for a "*.example.com" name → index
}

func newSet(pairs []tls.Certificate) (*Set, error) {
	if len(pairs) == 0 {
		return nil, errors.New("tls.certificates: at least one certificate required")
	}
	s := &Set{pairs: pairs, exact: map[string]int{}, wildcard: map[string]int{}}
	for i := range pairs {
		if pairs[i].Leaf == nil {
			continue
		}
		for _, n := range pairs[i].Leaf.DNSNames {
			n = strings.ToLower(strings.TrimSuffix(n, "."))
			idx := s.exact
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				n, idx = rest, s.wildcard
			}
			if _, dup := idx[n]; !dup {
				idx[n] = i
			}
		}
	}
	return s, nil
}

// Pick returns the index of the certificate to serve to a client that asked for serverName
// (SNI): the first certificate naming it exactly, else the first whose wildcard covers it (one
// label), else the first certificate, the default (also for a client that sends no name).
func (s *Set) Pick(serverName string) int {
	if serverName == "" {
		return 0
	}
	name := strings.ToLower(strings.TrimSuffix(serverName, "."))
	if i, ok := s.exact[name]; ok {
		return i
	}
	if _, parent, ok := strings.Cut(name, "."); ok {
		if i, ok := s.wildcard[parent]; ok {
			return i
		}
	}
	return 0
}

// certificate is the tls.Config.GetCertificate of the set.
func (s *Set) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &s.pairs[s.Pick(hello.ServerName)], nil
}
