package main

import (
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// testEtcd is a real etcd server in the test process, on 127.0.0.1 ports picked at random. It
// can be stopped and started again on the same data.
type testEtcd struct {
	t      testing.TB
	dir    string
	client string // host:port of the client listener
	peer   string
	etcd   *embed.Etcd
}

func startEtcd(t testing.TB) *testEtcd {
	t.Helper()
	e := &testEtcd{t: t, dir: t.TempDir(), client: freePort(t), peer: freePort(t)}
	e.start(e.client)
	t.Cleanup(e.stop)
	return e
}

// start serves the data on client (e.client, or another address that no pollbal knows).
func (e *testEtcd) start(client string) {
	e.t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(e.dir, "data")
	cfg.Name = "e2e"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu := url.URL{Scheme: "http", Host: client}
	pu := url.URL{Scheme: "http", Host: e.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	select {
	case <-srv.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		srv.Close()
		e.t.Fatal("etcd did not become ready in 30s")
	}
	e.etcd = srv
}

func (e *testEtcd) stop() {
	if e.etcd != nil {
		e.etcd.Close()
		e.etcd = nil
	}
}
