package balancer

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/configs"
)

// requestSeries counts the pollbal_requests_total and pollbal_request_duration_seconds series
// the registry exposes for app.
func requestSeries(t testing.TB, reg prometheus.Gatherer, app string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "pollbal_requests_total" && mf.GetName() != "pollbal_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "app" && lp.GetValue() == app {
					n++
				}
			}
		}
	}
	return n
}

// The request metrics of an app live on its App: the same handle in every snapshot while the
// app stays (a pool change included), a new one once it left and came back; requests that
// match no app have their own.
func TestRequestMetricsFollowTheApp(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := cfgOf([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}, {Name: "blog", Hosts: []string{"blog.test"}}}, []configs.Backend{{ID: "b1"}})
	b, err := New(Options{Config: cfg, Registerer: reg, Webhook: nopPoster{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	first := b.Snapshot()
	shop := first.Requests(first.AppByName("shop"))
	shop.Done(200, time.Millisecond)
	first.Requests(nil).Count(404)

	moved := *cfg
	moved.Apps = []configs.App{{Name: "shop", Hosts: []string{"shop.test"}, Service: "web", Pool: "pool-x"}}
	b.Update(&moved)
	snap := b.Snapshot()
	if got := snap.Requests(snap.AppByName("shop")); got != shop {
		t.Error("the app that stayed (moved to another pool) got new request metrics")
	}
	if got := snap.Requests(nil); got != first.Requests(nil) {
		t.Error("the no-app request metrics changed with the configuration")
	}
	if n := requestSeries(t, reg, "shop"); n != 2 {
		t.Errorf("%d series for shop after a pool change, want 2 (kept)", n)
	}
	if n := requestSeries(t, reg, "blog"); n != 0 {
		t.Errorf("%d series for the removed blog, want 0", n)
	}
	if n := requestSeries(t, reg, "-"); n != 2 {
		t.Errorf("%d series for requests without an app, want 2 (the 404 count and the duration)", n)
	}

	b.Update(cfg) // blog comes back
	snap = b.Snapshot()
	if got, old := snap.Requests(snap.AppByName("blog")), first.Requests(first.AppByName("blog")); got == old {
		t.Error("the app that came back reuses the retired request metrics")
	}
}

// Regression (and the race that caused it): a request that took an app's metrics before a
// reload removed the app, and then finished with a status code not seen before, re-created the
// removed app's series for good (a check of a retired flag, then the series made, with the
// removal in between). Here, round after round, requests in flight on the old snapshot finish
// with codes new to the app while a reload removes it; afterwards the registry exposes no
// series of it. Run under -race.
func TestRemovedAppSeriesStayRemoved(t *testing.T) {
	reg := prometheus.NewRegistry()
	with := cfgOf([]configs.App{{Name: "gone", Hosts: []string{"gone.test"}}, {Name: "kept", Hosts: []string{"kept.test"}}}, []configs.Backend{{ID: "b1"}})
	without := *with
	without.Apps = []configs.App{{Name: "kept", Hosts: []string{"kept.test"}, Service: "web"}}
	b, err := New(Options{Config: &without, Registerer: reg, Webhook: nopPoster{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	const (
		rounds   = 50
		inFlight = 4
	)
	for round := 0; round < rounds; round++ {
		b.Update(with)
		old := b.Snapshot()
		gone := old.Requests(old.AppByName("gone"))
		gone.Done(200, time.Millisecond)
		if n := requestSeries(t, reg, "gone"); n != 2 {
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
		b.Update(&without)
		wg.Wait()
		gone.Done(599, time.Millisecond) // and once more after they all finished
		if n := requestSeries(t, reg, "gone"); n != 0 {
			t.Fatalf("round %d: %d series for the removed app after its requests finished, want 0", round, n)
		}
	}
	kept := b.Snapshot().Requests(b.Snapshot().AppByName("kept"))
	kept.Done(503, time.Millisecond)
	if n := requestSeries(t, reg, "kept"); n != 2 {
		t.Fatalf("%d series for the app that stayed, want 2", n)
	}
}

// Issue 28: dashboard panels showed "no data" until a first event. The series whose labels
// the configuration already fixes exist from the start, at 0: no-app requests (always 404)
// and each backend's ignored reports; a backend that leaves takes its series with it.
func TestSeriesKnownFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := New(Options{Config: cfgOf([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1"}, {ID: "b2"}}),
		Registerer: reg, Webhook: nopPoster{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	want := `
# HELP pollbal_reports_ignored_total /pool answer lines dropped because they name a service the configuration does not declare.
# TYPE pollbal_reports_ignored_total counter
pollbal_reports_ignored_total{backend="b1"} 0
pollbal_reports_ignored_total{backend="b2"} 0
# HELP pollbal_requests_total Client requests answered, by app ("-" when no app matched) and status code.
# TYPE pollbal_requests_total counter
pollbal_requests_total{app="-",code="404"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pollbal_reports_ignored_total", "pollbal_requests_total"); err != nil {
		t.Fatal(err)
	}
	b.Update(cfgOf([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1"}}))
	if n := testutil.CollectAndCount(reg, "pollbal_reports_ignored_total"); n != 1 {
		t.Errorf("%d pollbal_reports_ignored_total series after b2 left, want 1", n)
	}
}
