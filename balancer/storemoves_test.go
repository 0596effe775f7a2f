package balancer

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"pollbal/configs"
)

func TestReplaceOverrides(t *testing.T) {
	cfg := cfgOf(nil, []configs.Backend{{ID: "a1"}, {ID: "a2", Pool: "pool-x"}})
	b := newTestBalancer(t, cfg, map[string]string{"a1": "pool-old"})
	if !b.ReplaceOverrides(map[string]string{"a2": "unassigned", "later": "pool-y"}) {
		t.Fatal("a new set reported as unchanged")
	}
	if b.ReplaceOverrides(map[string]string{"a2": "unassigned", "later": "pool-y"}) {
		t.Error("the same set reported as changed")
	}
	if got := b.Overrides(); !maps.Equal(got, map[string]string{"a2": "unassigned", "later": "pool-y"}) {
		t.Errorf("overrides %v", got)
	}
	for _, tc := range []struct{ id, pool, source string }{{"a1", "default", "default"}, {"a2", "unassigned", "admin"}} {
		if pool, source, _ := b.Snapshot().PoolOf(tc.id); pool != tc.pool || source != tc.source {
			t.Errorf("%s in %s (%s), want %s (%s)", tc.id, pool, source, tc.pool, tc.source)
		}
	}
	// The move for a backend this instance does not have applies when a reload adds it.
	cfg2 := cfgOf(nil, []configs.Backend{{ID: "a1"}, {ID: "a2", Pool: "pool-x"}, {ID: "later"}})
	b.Update(cfg2)
	if pool, source, _ := b.Snapshot().PoolOf("later"); pool != "pool-y" || source != "admin" {
		t.Errorf("later in %s (%s) after it appeared, want pool-y (admin)", pool, source)
	}
}

func TestStoreUnavailableAlarmDedup(t *testing.T) {
	cfg := cfgOf(nil, []configs.Backend{{ID: "a1"}})
	poster := &recordingPoster{got: make(chan []byte, 10)}
	b, advance := alarmBalancer(t, cfg, poster)
	b.StoreUnavailable("connection refused")
	b.StoreUnavailable("connection refused again")
	advance(2 * time.Minute)
	b.StoreUnavailable("still refused")
	b.Close()
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
}
