package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"pollbal/internal/testproc"
)

// Regression: when the TLS certificates failed to load at start, the etcd store of moves,
// opened just before, was never closed: its client's goroutines and connections stayed behind.
// newServer now closes what it opened when it fails. The store is the only thing newServer
// starts goroutines for, so the goroutine count shows the leak (like goleak would).
func TestStartFailureClosesTheMoveStore(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(cert, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Nothing listens on these: the failing start opens no listener, and the etcd client never
	// connects, it only tries.
	etcd := testproc.FreeAddr(t)
	cfg := filepath.Join(dir, "pollbal.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`site: test
listen: %s
admin:
  listen: %s
  state_file: %s
  store:
    etcd:
      endpoints: [%s]
      dial_timeout: 200ms
services:
  web: {}
apps:
  - name: shop
    hosts: [shop.test]
    service: web
backends:
  - id: web-1
    address: 127.0.0.1:1
tls:
  listen: %s
  certificates:
    - cert_file: %s
      key_file: %s
`, testproc.FreeAddr(t), testproc.FreeAddr(t), filepath.Join(dir, "state.json"), etcd, testproc.FreeAddr(t), cert, cert)), 0o600); err != nil {
		t.Fatal(err)
	}

	// An etcd client may start goroutines once per process (gRPC's own); let one come and go
	// before counting.
	warm, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 200 * time.Millisecond, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Close()
	baseline := settledGoroutines(t, 0)

	_, err = newServer(cfg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "tls.certificates[0]") {
		t.Fatalf("newServer = %v, want the certificate error", err)
	}
	if n := settledGoroutines(t, baseline); n > baseline {
		t.Fatalf("%d goroutines after the failed start, %d before: the store was left open\n%s", n, baseline, goroutineDump())
	}
}

// settledGoroutines waits up to 5 s for the goroutine count to come down to at most want (0:
// until it stops changing) and returns it.
func settledGoroutines(t *testing.T, want int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	last := runtime.NumGoroutine()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		<-tick.C
		n := runtime.NumGoroutine()
		if (want > 0 && n <= want) || (want == 0 && n == last) {
			return n
		}
		last = n
	}
	return last
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
