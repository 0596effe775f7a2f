package admin

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestReadOnlyEndpoints(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		path     string
		ready    bool
		wantCode int
		wantType string // Content-Type prefix
		wantBody string // substring
	}{
		{name: "status page", method: "GET", path: "/", wantCode: 200, wantType: "text/html", wantBody: "<!DOCTYPE html>"},
		{name: "status page HEAD", method: "HEAD", path: "/", wantCode: 200, wantType: "text/html"},
		{name: "status page POST", method: "POST", path: "/", wantCode: 405},
		{name: "unknown page", method: "GET", path: "/nothing-here", wantCode: 404},
		{name: "state", method: "GET", path: "/api/state", wantCode: 200, wantType: "application/json", wantBody: `"site":"test-site"`},
		{name: "state PUT", method: "PUT", path: "/api/state", wantCode: 405},
		{name: "metrics", method: "GET", path: "/metrics", wantCode: 200, wantType: "text/plain", wantBody: "pollbal_backend_ready"},
		{name: "metrics POST", method: "POST", path: "/metrics", wantCode: 405},
		{name: "healthz", method: "GET", path: "/healthz", wantCode: 200, wantType: "text/plain", wantBody: "ok"},
		{name: "healthz DELETE", method: "DELETE", path: "/healthz", wantCode: 405},
		{name: "readyz before the first round", method: "GET", path: "/readyz", wantCode: 503, wantType: "text/plain", wantBody: "not ready"},
		{name: "readyz after the first round", method: "GET", path: "/readyz", ready: true, wantCode: 200, wantType: "text/plain", wantBody: "ready"},
		{name: "readyz POST", method: "POST", path: "/readyz", wantCode: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			if tt.ready {
				f.bal.RoundDone()
			}
			resp := f.do(t, tt.method, tt.path, "", "")
			if resp.code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", resp.code, tt.wantCode, resp.body)
			}
			if ct := resp.header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("Content-Type %q, want %q", ct, tt.wantType)
			}
			if !strings.Contains(resp.body, tt.wantBody) {
				t.Errorf("body does not contain %q: %.300s", tt.wantBody, resp.body)
			}
		})
	}
}

func TestReadyzFollowsTheFirstRound(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	steps := []struct {
		name      string
		roundDone bool
		wantCode  int
		wantReady bool
	}{
		{name: "starting", wantCode: 503, wantReady: false},
		{name: "first round finished", roundDone: true, wantCode: 200, wantReady: true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.roundDone {
				f.bal.RoundDone()
			}
			if resp := f.do(t, "GET", "/readyz", "", ""); resp.code != st.wantCode {
				t.Errorf("/readyz status %d, want %d", resp.code, st.wantCode)
			}
			var s struct {
				Ready bool `json:"ready"`
			}
			if err := json.Unmarshal([]byte(f.do(t, "GET", "/api/state", "", "").body), &s); err != nil {
				t.Fatal(err)
			}
			if s.Ready != st.wantReady {
				t.Errorf("/api/state ready = %v, want %v", s.Ready, st.wantReady)
			}
		})
	}
}

// TestStateHasEverySpecField decodes /api/state generically and checks the SPEC §6 names, so a
// renamed JSON tag cannot slip through.
func TestStateHasEverySpecField(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.markReady("web-1", "web-2", "web-3")
	f.decideWarnings()
	f.bal.RoundDone()
	resp := f.do(t, "GET", "/api/state", "", "")
	if resp.code != 200 {
		t.Fatalf("status %d", resp.code)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(resp.body), &doc); err != nil {
		t.Fatal(err)
	}
	first := func(key string) map[string]any {
		list, _ := doc[key].([]any)
		if len(list) == 0 {
			t.Fatalf("%s is empty or missing: %s", key, resp.body)
		}
		m, ok := list[0].(map[string]any)
		if !ok {
			t.Fatalf("%s[0] is not an object", key)
		}
		return m
	}
	tests := []struct {
		name   string
		object map[string]any
		keys   []string
	}{
		{name: "top level", object: doc, keys: []string{"site", "version", "pid", "started", "ready", "backends", "groups", "apps", "pools"}},
		{name: "backends[0]", object: first("backends"), keys: []string{"id", "address", "pool", "pool_source", "ready", "reason",
			"reports", "capacity", "in_flight", "ejected", "warned", "last_check", "restored"}},
		{name: "backends[0].reports[0]", object: first("backends")["reports"].([]any)[0].(map[string]any), keys: []string{"service", "status", "version"}},
		{name: "groups[0]", object: first("groups"), keys: []string{"pool", "service", "version", "serving", "leaving", "threshold", "warned"}},
		{name: "apps[0]", object: first("apps"), keys: []string{"name", "service", "pool", "resolution", "allow_fallback_to_default", "candidates"}},
		{name: "pools[0]", object: first("pools"), keys: []string{"name", "backends", "scheduled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range tt.keys {
				if _, ok := tt.object[k]; !ok {
					have := make([]string, 0, len(tt.object))
					for h := range tt.object {
						have = append(have, h)
					}
					sort.Strings(have)
					t.Errorf("missing %q (have %v)", k, have)
				}
			}
		})
	}
	if doc["site"] != "test-site" || doc["version"] != "v1.2.3-test" || doc["ready"] != true {
		t.Errorf("site/version/ready = %v/%v/%v", doc["site"], doc["version"], doc["ready"])
	}
}

func TestMetricsServesTheBalancerMetrics(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.markReady("web-1", "web-2")
	f.decideWarnings()
	tests := []struct {
		name   string
		metric string
		want   int // series after two ready backends of four and one warning group
	}{
		{name: "backend_ready has one series per backend", metric: "pollbal_backend_ready", want: 4},
		{name: "backend_in_flight has one series per backend", metric: "pollbal_backend_in_flight", want: 4},
		{name: "group_serving has the pool-acme web v1 group", metric: "pollbal_group_serving", want: 1},
		{name: "group_leaving has the pool-acme web v1 group", metric: "pollbal_group_leaving", want: 1},
		{name: "pool_exhausted_total has one series per app", metric: "pollbal_pool_exhausted_total", want: 2},
		{name: "pool_fallback_total has one series per app", metric: "pollbal_pool_fallback_total", want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := testutil.GatherAndCount(f.reg, tt.metric)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.want {
				t.Errorf("%s has %d series, want %d", tt.metric, n, tt.want)
			}
		})
	}
	t.Run("lint", func(t *testing.T) {
		problems, err := testutil.GatherAndLint(f.reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	})
	t.Run("served over HTTP", func(t *testing.T) {
		body := f.do(t, "GET", "/metrics", "", "").body
		for _, line := range []string{
			`pollbal_backend_ready{backend="web-1",pool="pool-acme"} 1`,
			`pollbal_backend_ready{backend="web-3",pool="default"} 0`,
			`pollbal_group_serving{pool="pool-acme",service="web",version="v1"} 2`,
		} {
			if !strings.Contains(body, line) {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	})
	t.Run("a move relabels backend_ready", func(t *testing.T) {
		if resp := f.do(t, "PUT", "/admin/backends/web-1/pool", bearer(testToken), `{"pool":"unassigned"}`); resp.code != 200 {
			t.Fatalf("move: %d %s", resp.code, resp.body)
		}
		body := f.do(t, "GET", "/metrics", "", "").body
		if !strings.Contains(body, `pollbal_backend_ready{backend="web-1",pool="unassigned"} 1`) {
			t.Errorf("/metrics does not show web-1 in unassigned:\n%s", body)
		}
	})
}

// TestReadsAreQuiet: reading the state and the page must not add events or alarms.
func TestReadsAreQuiet(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.markReady("web-3")
	before := len(f.events.List())
	for _, path := range []string{"/", "/api/state", "/metrics"} {
		if resp := f.do(t, "GET", path, "", ""); resp.code != 200 {
			t.Fatalf("%s: %d", path, resp.code)
		}
	}
	if after := len(f.events.List()); after != before {
		t.Errorf("reads added %d events", after-before)
	}
	for _, e := range f.events.List() {
		if e.Kind == "pool_exhausted" || e.Kind == "pool_fallback" {
			t.Errorf("a read recorded %s: %s", e.Kind, e.Message)
		}
	}
	var s State
	if err := json.Unmarshal([]byte(f.do(t, "GET", "/api/state", "", "").body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Events) != before {
		t.Errorf("state lists %d events, want %d", len(s.Events), before)
	}
}
