package store

import (
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// testEtcd is a real etcd server in this process, on 127.0.0.1 ports picked at random; it can be
// stopped and started again on the same ports and data.
type testEtcd struct {
	t      testing.TB
	dir    string
	client string // host:port of the client listener
	peer   string
	etcd   *embed.Etcd
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startEtcd(t testing.TB) *testEtcd {
	t.Helper()
	e := &testEtcd{t: t, dir: t.TempDir(), client: freeAddr(t), peer: freeAddr(t)}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *testEtcd) start() {
	e.t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(e.dir, "data")
	cfg.Name = "test"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client := url.URL{Scheme: "http", Host: e.client}
	peer := url.URL{Scheme: "http", Host: e.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
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
