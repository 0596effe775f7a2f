package balancer

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/protocol"
)

func boolp(b bool) *bool { return &b }

// raiseTo stores n in a unless a already holds as much: a maximum that goroutines raise
// together.
func raiseTo(a *atomic.Int64, n int64) {
	for {
		old := a.Load()
		if n <= old || a.CompareAndSwap(old, n) {
			return
		}
	}
}

// newTestBalancer builds a balancer on cfg with a private registry.
func newTestBalancer(t testing.TB, cfg *configs.Config, overrides map[string]string) *Balancer {
	t.Helper()
	b, err := New(Options{Config: cfg, Overrides: overrides, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// markReady reports every listed backend ready and serving "web" (status per id in leaving).
func markReady(b *Balancer, ids []string, leaving ...string) {
	isLeaving := map[string]bool{}
	for _, id := range leaving {
		isLeaving[id] = true
	}
	for _, id := range ids {
		st := protocol.Serving
		if isLeaving[id] {
			st = protocol.Leaving
		}
		b.Observe(Observation{ID: id, Ready: true, Reports: []protocol.Report{{Service: "web", Status: st, Version: "v1"}}, Checked: time.Now()})
	}
}

// reloadReady reloads bal with apps and backends, and reports every backend ready.
func reloadReady(bal *Balancer, apps []configs.App, backends []configs.Backend) {
	bal.Update(configtest.New(apps, backends))
	ids := []string{}
	for _, b := range backends {
		ids = append(ids, b.ID)
	}
	markReady(bal, ids)
}

// recorder is an Observer and an Events that keeps everything it hears, in order.
type recorder struct {
	mu    sync.Mutex
	heard []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heard = append(r.heard, s)
}

func (r *recorder) Exhausted(pool, app, service string, fallbackAllowed bool) {
	r.note(fmt.Sprintf("exhausted %s %s %s %v", pool, app, service, fallbackAllowed))
}

func (r *recorder) FellBack(pool, app, service string) {
	r.note(fmt.Sprintf("fallback %s %s %s", pool, app, service))
}

func (r *recorder) Add(kind, message string) { r.note(kind + ": " + message) }

// all returns what r heard so far.
func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.heard)
}

// recordingBalancer builds a balancer on cfg whose Observer and Events are rec, with a private
// registry and clock (nil: time.Now).
func recordingBalancer(t testing.TB, cfg *configs.Config, rec *recorder, now func() time.Time) *Balancer {
	t.Helper()
	b, err := New(Options{Config: cfg, Registerer: prometheus.NewRegistry(), Observer: rec, Events: rec, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
