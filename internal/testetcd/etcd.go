// Package testetcd runs a real etcd server inside the test process, on 127.0.0.1 ports picked at
// random, for the tests of the etcd-backed store and of pollbal instances sharing it. It is a
// package of its own so that only the tests that need etcd link it.
//
// It is imported only by _test.go files.
package testetcd

import (
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"pollbal/internal/testproc"
)

// Server is one etcd member. It can be stopped and started again on the same data, at its
// address or at another. Not safe for concurrent use.
type Server struct {
	// Client is the host:port of the client listener it was started on.
	Client string

	t    testing.TB
	dir  string
	peer string
	etcd *embed.Etcd
}

// Start starts a server and stops it at the test's cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), Client: testproc.FreeAddr(t), peer: testproc.FreeAddr(t)}
	s.Serve(s.Client)
	t.Cleanup(s.Stop)
	return s
}

// Serve starts serving the data on client (s.Client, or an address that no client knows) and
// returns once the server is ready.
func (s *Server) Serve(client string) {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(s.dir, "data")
	cfg.Name = "test"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu := url.URL{Scheme: "http", Host: client}
	pu := url.URL{Scheme: "http", Host: s.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-srv.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		srv.Close()
		s.t.Fatal("etcd did not become ready in 30s")
	}
	s.etcd = srv
}

// Serving is the client address it serves on now.
func (s *Server) Serving() string { return s.etcd.Clients[0].Addr().String() }

// Stop stops the server, keeping its data; stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
	}
}
