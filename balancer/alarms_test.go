package balancer

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
)

// recordingPoster records webhook posts and can fail the first few.
type recordingPoster struct {
	mu       sync.Mutex
	failures int
	bodies   [][]byte
	got      chan []byte
}

func (p *recordingPoster) Post(_ context.Context, _ string, body []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failures > 0 {
		p.failures--
		return errors.New("refused")
	}
	p.bodies = append(p.bodies, body)
	p.got <- body
	return nil
}

// alarmBalancer is a balancer on cfg that posts its alarms to poster, deduplicated over a
// minute of a clock that starts at a fixed time and moves only by advance.
func alarmBalancer(t *testing.T, cfg *configs.Config, poster *recordingPoster) (b *Balancer, advance func(time.Duration)) {
	t.Helper()
	cfg.Alarms.Webhook = "http://127.0.0.1:1/alarm"
	cfg.Alarms.DedupWindow = time.Minute
	var clock sync.Mutex
	now := time.Unix(5000, 0)
	b, err := New(Options{Config: cfg, Registerer: prometheus.NewRegistry(), Webhook: poster, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b, func(d time.Duration) {
		clock.Lock()
		defer clock.Unlock()
		now = now.Add(d)
	}
}

func TestPoolExhaustedAlarmDedup(t *testing.T) {
	cfg := cfgOf([]configs.App{
		{Name: "shop", Hosts: []string{"shop.test"}, Owner: "acme", AllowFallbackToDefault: boolp(false)},
		{Name: "blog", Hosts: []string{"blog.test"}, Owner: "acme", AllowFallbackToDefault: boolp(false)},
	}, []configs.Backend{{ID: "a1", Owner: "acme"}})
	poster := &recordingPoster{failures: 1, got: make(chan []byte, 10)}
	b, advance := alarmBalancer(t, cfg, poster)
	s := b.Snapshot()
	for i := 0; i < 5; i++ {
		if _, err := s.Acquire(s.AppByName("shop"), nil); !errors.Is(err, ErrNoCandidate) {
			t.Fatalf("got %v, want ErrNoCandidate", err)
		}
	}
	if _, err := s.Acquire(s.AppByName("blog"), nil); !errors.Is(err, ErrNoCandidate) {
		t.Fatal(err)
	}
	if got := testCounter(t, s.AppByName("shop").counters.exhausted); got != 5 {
		t.Fatalf("pool_exhausted_total{shop} = %v, want 5 (the counter is not deduplicated)", got)
	}
	advance(2 * time.Minute)
	if _, err := s.Acquire(s.AppByName("shop"), nil); !errors.Is(err, ErrNoCandidate) {
		t.Fatal(err)
	}
	b.Close() // waits for deliveries (the first post fails once and is retried)
	if len(poster.bodies) != 3 {
		t.Fatalf("webhook got %d alarms, want 3 (shop, blog, shop after the window)", len(poster.bodies))
	}
	var a Alarm
	if err := json.Unmarshal(poster.bodies[0], &a); err != nil {
		t.Fatal(err)
	}
	if a.Alarm != "pool_exhausted" || a.Pool != "pool-acme" || a.Service != "web" || a.Site != "test" {
		t.Fatalf("alarm body %+v", a)
	}
	n := 0
	for _, e := range b.Events().List() {
		if e.Kind == "pool_exhausted" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d pool_exhausted events, want 3", n)
	}
}

func TestFallbackNeverAlarms(t *testing.T) {
	cfg := cfgOf([]configs.App{{Name: "shop", Hosts: []string{"*"}, Owner: "acme"}}, []configs.Backend{{ID: "d1"}})
	cfg.Alarms.Webhook = "http://127.0.0.1:1/alarm"
	poster := &recordingPoster{got: make(chan []byte, 10)}
	b, err := New(Options{Config: cfg, Registerer: prometheus.NewRegistry(), Webhook: poster})
	if err != nil {
		t.Fatal(err)
	}
	markReady(b, []string{"d1"})
	s := b.Snapshot()
	for i := 0; i < 3; i++ {
		l, err := s.Acquire(s.AppByName("shop"), nil)
		if err != nil || !l.Fallback {
			t.Fatalf("want a fallback lease, got %+v %v", l, err)
		}
		l.Release()
	}
	b.Close()
	if len(poster.bodies) != 0 {
		t.Fatalf("fallback posted %d alarms, want none", len(poster.bodies))
	}
	if got := testCounter(t, s.AppByName("shop").counters.fallback); got != 3 {
		t.Fatalf("pool_fallback_total = %v, want 3", got)
	}
	kinds := map[string]int{}
	for _, e := range b.Events().List() {
		kinds[e.Kind]++
	}
	if kinds["pool_fallback"] != 1 || kinds["pool_exhausted"] != 0 {
		t.Fatalf("events %v, want one pool_fallback (deduplicated) and no pool_exhausted", kinds)
	}
}

func TestQuietStateNeverAlarms(t *testing.T) {
	cfg := cfgOf([]configs.App{{Name: "shop", Hosts: []string{"*"}, Pool: "pool-acme"}}, []configs.Backend{{ID: "a1", Owner: "acme"}})
	b := newTestBalancer(t, cfg, nil)
	for i := 0; i < 3; i++ {
		st := b.State()
		if st.Apps[0].Candidates != 0 || st.Apps[0].Pool != "pool-acme" || st.Apps[0].Resolution != "explicit" {
			t.Fatalf("app state %+v", st.Apps[0])
		}
	}
	if got := testCounter(t, b.Snapshot().AppByName("shop").counters.exhausted); got != 0 {
		t.Fatalf("reading state counted %v exhaustions", got)
	}
	for _, e := range b.Events().List() {
		if e.Kind == "pool_exhausted" {
			t.Fatal("reading state raised pool_exhausted")
		}
	}
	markReady(b, []string{"a1"})
	if c := b.State().Apps[0].Candidates; c != 1 {
		t.Fatalf("candidates %d, want 1", c)
	}
}
