package admin

import (
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"pollbal/store"
)

func storeObject(t *testing.T, f *fixture) store.Status {
	t.Helper()
	r := f.do(t, http.MethodGet, "/api/state", "", "")
	var s struct {
		Store *store.Status `json:"store"`
	}
	if err := json.Unmarshal([]byte(r.body), &s); err != nil || s.Store == nil {
		t.Fatalf("/api/state has no store object: %v %s", err, r.body)
	}
	return *s.Store
}

func TestStateNamesTheLocalStore(t *testing.T) {
	if got := storeObject(t, newFixture(t, fixtureOptions{})); got != (store.Status{Kind: "file", Up: true}) {
		t.Errorf("with a state file: %+v", got)
	}
	if got := storeObject(t, newFixture(t, fixtureOptions{stateFile: "-"})); got != (store.Status{Kind: "memory", Up: true}) {
		t.Errorf("without a state file: %+v", got)
	}
}

// unreachableEtcd is a real etcd store whose endpoint nothing listens on; it has never read
// etcd, so it is down.
func unreachableEtcd(t *testing.T) *store.Etcd {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	st, err := store.NewEtcd(store.EtcdOptions{Endpoints: []string{addr}, Prefix: "/t/", DialTimeout: 200 * time.Millisecond,
		Apply: func(store.Update) {}, Up: func(bool, error) {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestMovesRefusedWhileTheStoreIsUnavailable(t *testing.T) {
	f := newFixture(t, fixtureOptions{store: unreachableEtcd(t), overrides: map[string]string{"web-3": "unassigned"}})
	before := f.bal.Overrides()
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPut, "/admin/backends/web-1/pool", `{"pool":"unassigned"}`},
		{http.MethodDelete, "/admin/backends/web-3/pool", ""},
	} {
		r := f.do(t, tc.method, tc.path, bearer(testToken), tc.body)
		if r.code != http.StatusServiceUnavailable || r.header.Get("X-Pollbal-Reason") != ReasonStoreUnavailable ||
			!strings.Contains(r.body, `"reason":"store_unavailable"`) {
			t.Fatalf("%s %s: %d %q %s, want 503 store_unavailable", tc.method, tc.path, r.code, r.header.Get("X-Pollbal-Reason"), r.body)
		}
	}
	if got := f.bal.Overrides(); !maps.Equal(got, before) {
		t.Errorf("refused moves changed the overrides: %v, want %v", got, before)
	}
	audits := f.logs.records(t, "admin call")
	if len(audits) != 2 || audits[0]["status"] != float64(503) || audits[0]["reason"] != ReasonStoreUnavailable {
		t.Errorf("audit lines %v", audits)
	}
	if got := storeObject(t, f); got != (store.Status{Kind: "etcd"}) {
		t.Errorf("store object %+v, want etcd, down", got)
	}
	page := f.do(t, http.MethodGet, "/", "", "")
	if !strings.Contains(page.body, `id="store" data-kind="etcd" data-up="false"`) || !strings.Contains(page.body, "unreachable") {
		t.Errorf("the status page does not show the unreachable store")
	}
}

// ApplyStore gives the balancer the whole set, keeps it in the state file as the cache, and
// writes an audit line per change with its revision.
func TestApplyStore(t *testing.T) {
	f := newFixture(t, fixtureOptions{store: unreachableEtcd(t), overrides: map[string]string{"web-3": "unassigned"}})
	moves := map[string]string{"web-1": "canary", "elsewhere-9": "unassigned"}
	f.srv.ApplyStore(store.Update{Moves: moves, Revision: 7, Changes: []store.Change{
		{ID: "web-1", Pool: "canary", Revision: 7}, {ID: "elsewhere-9", Pool: "unassigned", Revision: 6}, {ID: "web-3", Revision: 5},
	}})
	if got := f.bal.Overrides(); !maps.Equal(got, moves) {
		t.Errorf("overrides %v, want %v", got, moves)
	}
	if got := f.poolOf(t, "web-1"); got != "canary/admin" {
		t.Errorf("web-1 in %s", got)
	}
	if got := stateFileOverrides(t, f.stateFile); !maps.Equal(got, moves) {
		t.Errorf("state file %v, want the moves read", got)
	}
	lines := f.logs.records(t, "admin move applied")
	if len(lines) != 3 {
		t.Fatalf("%d audit lines, want 3", len(lines))
	}
	if l := lines[2]; l["action"] != "clear_override" || l["target"] != "web-3" || l["revision"] != float64(5) {
		t.Errorf("audit line of the dropped move: %v", l)
	}
	if l := lines[0]; l["action"] != "move" || l["pool"] != "canary" || l["revision"] != float64(7) {
		t.Errorf("audit line of the move: %v", l)
	}
}

// Regression: a value in the shared store that is not a pool name (or a key that is not a
// backend id) was written as-is to the state file, the cache read at the next start, which then
// refused it as corrupt: pollbal would not start again. The cache keeps only the valid moves,
// the same ones the balancer applies.
func TestApplyStoreCachesOnlyValidMoves(t *testing.T) {
	f := newFixture(t, fixtureOptions{store: unreachableEtcd(t)})
	f.srv.ApplyStore(store.Update{Moves: map[string]string{
		"web-1": "canary", "web-2": "Not A Pool", "": "canary", "a/b": "canary", "web-3": "",
	}, Revision: 9, Changes: []store.Change{
		{ID: "web-1", Pool: "canary", Revision: 5}, {ID: "web-2", Pool: "Not A Pool", Revision: 6},
		{ID: "a/b", Pool: "canary", Revision: 7}, {ID: "web-3", Pool: "", Revision: 8},
	}})
	want := map[string]string{"web-1": "canary"}
	if got := f.bal.Overrides(); !maps.Equal(got, want) {
		t.Errorf("overrides %v, want %v", got, want)
	}
	got, err := LoadState(f.stateFile)
	if err != nil {
		t.Fatalf("the state file written from the shared store cannot be read back: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("state file %v, want %v", got, want)
	}
	// The audit lines name what was applied: the move of web-1 and the drop of web-3's move.
	lines := f.logs.records(t, "admin move applied")
	if len(lines) != 2 || lines[0]["target"] != "web-1" || lines[1]["target"] != "web-3" {
		t.Errorf("audit lines %v, want web-1's move and web-3's clear only", lines)
	}
}
