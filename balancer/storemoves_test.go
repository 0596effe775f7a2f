package balancer

import (
	"maps"
	"testing"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

func TestReplaceOverrides(t *testing.T) {
	cfg := configtest.New(nil, []configs.Backend{{ID: "a1"}, {ID: "a2", Pool: "pool-x"}})
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
	cfg2 := configtest.New(nil, []configs.Backend{{ID: "a1"}, {ID: "a2", Pool: "pool-x"}, {ID: "later"}})
	b.Update(cfg2)
	if pool, source, _ := b.Snapshot().PoolOf("later"); pool != "pool-y" || source != "admin" {
		t.Errorf("later in %s (%s) after it appeared, want pool-y (admin)", pool, source)
	}
}
