package alarms

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// recordingPoster records webhook posts and can fail the first few.
type recordingPoster struct {
	mu       sync.Mutex
	failures int
	bodies   [][]byte
}

func (p *recordingPoster) Post(_ context.Context, _ string, body []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failures > 0 {
		p.failures--
		return errors.New("refused")
	}
	p.bodies = append(p.bodies, body)
	return nil
}

// testNotifier is a Notifier that posts to poster, deduplicating over a minute of a clock that
// starts at a fixed time and moves only by advance.
func testNotifier(t *testing.T, poster *recordingPoster) (n *Notifier, advance func(time.Duration)) {
	t.Helper()
	cfg := configtest.New(nil, nil, configtest.Alarms(configs.Alarms{Webhook: "http://127.0.0.1:1/alarm", DedupWindow: time.Minute}))
	var clock sync.Mutex
	now := time.Unix(5000, 0)
	n, err := New(Options{Config: cfg, Poster: poster, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	return n, func(d time.Duration) {
		clock.Lock()
		defer clock.Unlock()
		now = now.Add(d)
	}
}

// kinds counts the events of n's ring by kind.
func kinds(n *Notifier) map[string]int {
	out := map[string]int{}
	for _, e := range n.Events().List() {
		out[e.Kind]++
	}
	return out
}

func TestPoolExhaustedAlarmDedup(t *testing.T) {
	poster := &recordingPoster{failures: 1}
	n, advance := testNotifier(t, poster)
	for range 5 {
		n.Exhausted("pool-acme", "shop", "web", false)
	}
	n.Exhausted("pool-acme", "blog", "web", false)
	advance(2 * time.Minute)
	n.Exhausted("pool-acme", "shop", "web", false)
	n.Close() // waits for deliveries (the first post fails once and is retried)
	if len(poster.bodies) != 3 {
		t.Fatalf("webhook got %d alarms, want 3 (shop, blog, shop after the window)", len(poster.bodies))
	}
	var a Alarm
	if err := json.Unmarshal(poster.bodies[0], &a); err != nil {
		t.Fatal(err)
	}
	if a.Alarm != "pool_exhausted" || a.Pool != "pool-acme" || a.Service != "web" || a.Site != "test" || a.Time.IsZero() {
		t.Fatalf("alarm body %+v", a)
	}
	if got := kinds(n)["pool_exhausted"]; got != 3 {
		t.Fatalf("%d pool_exhausted events, want 3", got)
	}
}

func TestFallbackNeverAlarms(t *testing.T) {
	poster := &recordingPoster{}
	n, _ := testNotifier(t, poster)
	for range 3 {
		n.FellBack("pool-acme", "shop", "web")
	}
	n.Close()
	if len(poster.bodies) != 0 {
		t.Fatalf("fallback posted %d alarms, want none", len(poster.bodies))
	}
	if k := kinds(n); k["pool_fallback"] != 1 || k["pool_exhausted"] != 0 {
		t.Fatalf("events %v, want one pool_fallback (deduplicated) and no pool_exhausted", k)
	}
}

func TestStoreUnavailableAlarmDedup(t *testing.T) {
	poster := &recordingPoster{}
	n, advance := testNotifier(t, poster)
	n.StoreUnavailable("connection refused")
	n.StoreUnavailable("connection refused again")
	advance(2 * time.Minute)
	n.StoreUnavailable("still refused")
	n.Close()
	if len(poster.bodies) != 2 {
		t.Fatalf("webhook got %d alarms, want 2 (one per dedup window)", len(poster.bodies))
	}
	// Deliveries run concurrently: compare the set of reasons.
	reasons := map[string]bool{}
	for _, body := range poster.bodies {
		var a StoreAlarm
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		if a.Alarm != "store_unavailable" || a.Site != "test" {
			t.Errorf("alarm body %+v", a)
		}
		reasons[a.Reason] = true
	}
	if !reasons["connection refused"] || !reasons["still refused"] {
		t.Errorf("alarm reasons %v, want the first of each window", reasons)
	}
	if got := kinds(n)["store_unavailable"]; got != 2 {
		t.Errorf("%d store_unavailable events, want 2", got)
	}
}

// A reload's alarms section applies to the next alarm: a webhook removed posts nothing.
func TestUpdateAppliesTheNewWebhook(t *testing.T) {
	poster := &recordingPoster{}
	n, _ := testNotifier(t, poster)
	n.Update(configtest.New(nil, nil, configtest.Alarms(configs.Alarms{DedupWindow: time.Minute})))
	n.Exhausted("pool-acme", "shop", "web", false)
	n.Close()
	if len(poster.bodies) != 0 {
		t.Fatalf("webhook got %d alarms after the reload removed it, want none", len(poster.bodies))
	}
	if got := kinds(n)["pool_exhausted"]; got != 1 {
		t.Fatalf("%d pool_exhausted events, want 1 (listed without a webhook)", got)
	}
}

func TestNewRejectsNilConfig(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a configuration: no error")
	}
}
