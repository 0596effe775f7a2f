package balancer

import (
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// Exhausted is raised in one place, Report: each report counts pollbal_pool_exhausted_total and
// tells the Observer, which deduplicates the alarm (package alarms); Acquire on an exhausted
// pool raises nothing, whoever calls it.
func TestExhaustedIsRaisedByReportOnly(t *testing.T) {
	cfg := configtest.New([]configs.App{
		{Name: "shop", Hosts: []string{"shop.test"}, Owner: "acme", AllowFallbackToDefault: boolp(false)},
		{Name: "blog", Hosts: []string{"blog.test"}, Owner: "acme", AllowFallbackToDefault: boolp(false)},
	}, []configs.Backend{{ID: "a1", Owner: "acme"}})
	rec := &recorder{}
	b := recordingBalancer(t, cfg, rec, nil)
	s := b.Snapshot()
	shop, blog := s.AppByName("shop"), s.AppByName("blog")
	for range 3 {
		if _, err := b.Acquire(s, shop, nil); !errors.Is(err, ErrNoCandidate) {
			t.Fatalf("got %v, want ErrNoCandidate", err)
		}
	}
	if got := testutil.ToFloat64(shop.counters.exhausted); got != 0 || len(rec.all()) != 0 {
		t.Fatalf("Acquire alone counted %v exhaustions and told %q, want nothing", got, rec.all())
	}
	for range 5 {
		b.Report(Result{Outcome: Exhausted, App: shop})
	}
	b.Report(Result{Outcome: Exhausted, App: blog})
	if got := testutil.ToFloat64(shop.counters.exhausted); got != 5 {
		t.Errorf("pool_exhausted_total{shop} = %v, want 5 (the counter is not deduplicated)", got)
	}
	if got := testutil.ToFloat64(blog.counters.exhausted); got != 1 {
		t.Errorf("pool_exhausted_total{blog} = %v, want 1", got)
	}
	want := slices.Repeat([]string{"exhausted pool-acme shop web false"}, 5)
	want = append(want, "exhausted pool-acme blog web false")
	if got := rec.all(); !slices.Equal(got, want) {
		t.Errorf("the Observer heard %q, want %q", got, want)
	}
}

// A lease served from default is counted and told to the Observer each time; never as an
// exhaustion.
func TestFallbackIsCountedAndObserved(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}, Owner: "acme"}}, []configs.Backend{{ID: "d1"}})
	rec := &recorder{}
	b := recordingBalancer(t, cfg, rec, nil)
	markReady(b, []string{"d1"})
	before := len(rec.all()) // the ready event
	s := b.Snapshot()
	for range 3 {
		l, err := b.Acquire(s, s.AppByName("shop"), nil)
		if err != nil || !l.Fallback || l.Pool != configs.PoolDefault {
			t.Fatalf("want a fallback lease from default, got %+v %v", l, err)
		}
		l.Release()
	}
	if got := testutil.ToFloat64(s.AppByName("shop").counters.fallback); got != 3 {
		t.Fatalf("pool_fallback_total = %v, want 3", got)
	}
	if got, want := rec.all()[before:], slices.Repeat([]string{"fallback pool-acme shop web"}, 3); !slices.Equal(got, want) {
		t.Fatalf("the Observer heard %q, want %q", got, want)
	}
}

// The quiet read path (Members, Candidates, Pools) counts, tells and takes nothing.
func TestQuietReadNeverAlarms(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}, Pool: "pool-acme"}}, []configs.Backend{{ID: "a1", Owner: "acme"}})
	rec := &recorder{}
	b := recordingBalancer(t, cfg, rec, nil)
	s := b.Snapshot()
	app := s.AppByName("shop")
	for range 3 {
		if own, fallback := s.Candidates(app, b.now()); own != 0 || fallback != 0 {
			t.Fatalf("candidates %d and %d, want none", own, fallback)
		}
		s.Members(b.now())
		s.Pools()
	}
	if got := testutil.ToFloat64(app.counters.exhausted); got != 0 || len(rec.all()) != 0 {
		t.Fatalf("reading counted %v exhaustions and told %q", got, rec.all())
	}
	markReady(b, []string{"a1"})
	if own, _ := b.Snapshot().Candidates(b.Snapshot().AppByName("shop"), b.now()); own != 1 {
		t.Fatalf("candidates %d, want 1", own)
	}
	if n := b.Snapshot().Members(b.now())[0].Backend.InFlight(); n != 0 {
		t.Fatalf("reading took %d leases", n)
	}
}
