package proxy

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
)

// newRequestTable builds a balancer on cfg and the request metrics that follow it, registered
// in reg.
func newRequestTable(t *testing.T, cfg *configs.Config, reg prometheus.Registerer) (*balancer.Balancer, *requestMetrics) {
	t.Helper()
	bal, err := balancer.New(balancer.Options{Config: cfg, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRequestMetrics(bal, reg)
	if err != nil {
		t.Fatal(err)
	}
	return bal, r
}

// An app's request metrics follow it by name: the same series in every snapshot while the app
// stays (a pool change included), new ones once it left and came back; a reload that removes an
// app deletes its series by the next scrape, without a request; requests that match no app have
// their own.
func TestRequestMetricsFollowTheApp(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}, {Name: "blog", Hosts: []string{"blog.test"}}}, []configs.Backend{{ID: "b1", Address: "127.0.0.1:1"}}, tieBreakID)
	bal, r := newRequestTable(t, cfg, reg)
	first := bal.Snapshot()
	shop := r.of(first, first.AppByName("shop"))
	blog := r.of(first, first.AppByName("blog"))
	shop.Done(200, time.Millisecond)
	r.of(first, nil).Count(404)

	moved := *cfg
	moved.Apps = []configs.App{{Name: "shop", Hosts: []string{"shop.test"}, Service: "web", Pool: "pool-x"}}
	bal.Update(&moved)
	if n := metrictest.Count(t, reg, `pollbal_requests_total{app="blog"}`); n != 0 {
		t.Errorf("%d series for the removed blog at the first scrape after the reload, want 0", n)
	}
	snap := bal.Snapshot()
	if got := r.of(snap, snap.AppByName("shop")); got != shop {
		t.Error("the app that stayed (moved to another pool) got new request metrics")
	}
	if got := r.of(first, first.AppByName("shop")); got != shop {
		t.Error("a request on the older snapshot counts the app that stayed elsewhere")
	}
	if got := r.of(snap, nil); got != r.of(first, nil) {
		t.Error("the no-app request metrics changed with the configuration")
	}
	if n := metrictest.Count(t, reg, `pollbal_requests_total{app="shop"}`) + metrictest.Count(t, reg, `pollbal_request_duration_seconds{app="shop"}`); n != 2 {
		t.Errorf("%d series for shop after a pool change, want 2 (kept)", n)
	}
	if n := metrictest.Count(t, reg, `pollbal_requests_total{app="-"}`) + metrictest.Count(t, reg, `pollbal_request_duration_seconds{app="-"}`); n != 2 {
		t.Errorf("%d series for requests without an app, want 2 (the 404 count and the duration)", n)
	}

	bal.Update(cfg) // blog comes back
	snap = bal.Snapshot()
	if got := r.of(snap, snap.AppByName("blog")); got == blog {
		t.Error("the app that came back reuses the retired request metrics")
	}
}

// Regression (and the race that caused it): a request that took an app's metrics before a
// reload removed the app, and then finished with a status code not seen before, re-created the
// removed app's series for good (a check of a retired flag, then the series made, with the
// removal in between). Here, round after round, requests in flight on the old snapshot finish
// with codes new to the app while a reload removes it; afterwards the registry exposes no
// series of it. A request that takes the app's metrics only after the reload, on its old
// snapshot, counts nowhere either. Run under -race.
func TestRemovedAppSeriesStayRemoved(t *testing.T) {
	reg := prometheus.NewRegistry()
	with := configtest.New([]configs.App{{Name: "gone", Hosts: []string{"gone.test"}}, {Name: "kept", Hosts: []string{"kept.test"}}}, []configs.Backend{{ID: "b1", Address: "127.0.0.1:1"}}, tieBreakID)
	without := *with
	without.Apps = []configs.App{{Name: "kept", Hosts: []string{"kept.test"}, Service: "web"}}
	bal, r := newRequestTable(t, &without, reg)
	const (
		rounds   = 50
		inFlight = 4
	)
	for round := 0; round < rounds; round++ {
		bal.Update(with)
		old := bal.Snapshot()
		gone := r.of(old, old.AppByName("gone"))
		gone.Done(200, time.Millisecond)
		if n := metrictest.Count(t, reg, `pollbal_requests_total{app="gone"}`) + metrictest.Count(t, reg, `pollbal_request_duration_seconds{app="gone"}`); n != 2 {
			t.Fatalf("round %d: %d series for gone before the reload, want 2", round, n)
		}
		var (
			wg   sync.WaitGroup
			done atomic.Int64
		)
		for i := 0; i < inFlight; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Every code is new to the app: each one takes the path that makes a series.
				for code := 201 + i; code < maxCode; code += inFlight {
					gone.Done(code, time.Millisecond)
					done.Add(1)
				}
			}()
		}
		for done.Load() < inFlight { // the reload lands while they are making series
			runtime.Gosched()
		}
		bal.Update(&without)
		r.of(bal.Snapshot(), nil) // a request on the new configuration
		r.of(bal.Snapshot(), bal.Snapshot().AppByName("kept"))
		wg.Wait()
		gone.Done(599, time.Millisecond)                             // and once more after they all finished
		r.of(old, old.AppByName("gone")).Done(598, time.Millisecond) // a late request on the old snapshot
		for _, name := range []string{"pollbal_requests_total", "pollbal_request_duration_seconds"} {
			if n := metrictest.Count(t, reg, name+`{app="gone"}`); n != 0 {
				t.Fatalf("round %d: %d %s series for the removed app after its requests finished, want 0", round, n, name)
			}
		}
	}
	snap := bal.Snapshot()
	r.of(snap, snap.AppByName("kept")).Done(503, time.Millisecond)
	if n := metrictest.Count(t, reg, `pollbal_requests_total{app="kept"}`) + metrictest.Count(t, reg, `pollbal_request_duration_seconds{app="kept"}`); n != 2 {
		t.Fatalf("%d series for the app that stayed, want 2", n)
	}
}

// Issue 28: dashboard panels showed "no data" until a first event. Requests that match no app
// are always answered 404, so that series exists from the start, at 0, and an app's series
// only once it answered.
func TestNoAppSeriesKnownFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	newRequestTable(t, configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: "127.0.0.1:1"}}, tieBreakID), reg)
	want := `
# HELP pollbal_requests_total Client requests answered, by app ("-" when no app matched) and status code.
# TYPE pollbal_requests_total counter
pollbal_requests_total{app="-",code="404"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pollbal_requests_total"); err != nil {
		t.Fatal(err)
	}
}
