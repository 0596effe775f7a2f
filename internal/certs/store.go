package certs

import (
	"crypto/tls"
	"sync/atomic"
)

// Store holds what the TLS listener serves: the certificate set and the lowest version. A
// reload replaces both at once with Swap; handshakes already under way finish with what they
// started with. It is safe for concurrent use and must not be copied.
type Store struct {
	cur    atomic.Pointer[tls.Config]
	protos []string // offered by ALPN; read-only
}

// NewStore returns a store serving set with minVersion (a crypto/tls version constant),
// offering protos by ALPN in that order (e.g. "h2", "http/1.1").
func NewStore(set *Set, minVersion uint16, protos []string) *Store {
	s := &Store{protos: protos}
	s.Swap(set, minVersion)
	return s
}

// Swap makes new handshakes use set and minVersion.
func (s *Store) Swap(set *Set, minVersion uint16) {
	s.cur.Store(&tls.Config{
		MinVersion:     minVersion,
		NextProtos:     s.protos,
		GetCertificate: set.certificate,
	})
}

// ServerConfig is the tls.Config for the listener: each handshake takes the store's current
// settings. Session tickets are shared across swaps.
func (s *Store) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: s.protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load(), nil
		},
	}
}
