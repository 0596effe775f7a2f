package admin

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
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

// committingStore is a shared store of moves that commits every write at once but has no
// watch: nothing it commits is ever applied by itself. It counts the WaitApplied calls, which
// answer at once. It is safe for concurrent use.
type committingStore struct {
	mu    sync.Mutex
	moves map[string]string
	rev   int64
	waits []int64 // the revisions WaitApplied was asked for
}

func (s *committingStore) Put(_ context.Context, id, pool string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.moves[id] = pool
	return s.rev, nil
}

func (s *committingStore) Delete(_ context.Context, id string) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.moves[id]; !ok {
		return s.rev, false, nil
	}
	s.rev++
	delete(s.moves, id)
	return s.rev, true, nil
}

func (s *committingStore) WaitApplied(_ context.Context, rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, rev)
	return true
}

func (s *committingStore) Status() store.Status { return store.Status{Kind: store.KindEtcd, Up: true} }

func (s *committingStore) waited() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

// Regression: DELETE of a move that the shared store does not hold waited the whole applyWait
// (2 s) for this instance to apply a revision no update would ever bring (a no-op delete
// creates no watch event). It answers at once now, as a local DELETE of nothing does; a delete
// that dropped a move, or one whose move is still applied here, still waits.
func TestStoreDeleteOfNoMoveAnswersAtOnce(t *testing.T) {
	st := &committingStore{moves: map[string]string{"web-2": "canary"}, rev: 10}
	f := newFixture(t, fixtureOptions{store: st, overrides: map[string]string{"web-2": "canary", "web-3": "unassigned"}})

	r := f.do(t, http.MethodDelete, "/admin/backends/web-1/pool", bearer(testToken), "")
	if r.code != http.StatusOK || !strings.Contains(r.body, `"id":"web-1"`) {
		t.Fatalf("DELETE of no move: %d %s, want 200 with the backend", r.code, r.body)
	}
	if w := st.waited(); len(w) != 0 {
		t.Fatalf("DELETE of no move waited for revisions %v, want no wait", w)
	}
	audits := f.logs.records(t, "admin call")
	if len(audits) != 1 || audits[0]["status"] != float64(200) || audits[0]["revision"] != nil {
		t.Errorf("audit line %v, want 200 and no revision (nothing was committed)", audits)
	}

	// A move the store held: dropped at revision 11, which the answer waits for.
	if r := f.do(t, http.MethodDelete, "/admin/backends/web-2/pool", bearer(testToken), ""); r.code != http.StatusOK {
		t.Fatalf("DELETE of web-2's move: %d %s", r.code, r.body)
	}
	if w := st.waited(); !slices.Equal(w, []int64{11}) {
		t.Fatalf("waited for %v, want [11]", w)
	}

	// Not in the store but still applied here (another instance dropped it; the watch has not
	// delivered that yet): the answer waits for the update that removes it.
	if r := f.do(t, http.MethodDelete, "/admin/backends/web-3/pool", bearer(testToken), ""); r.code != http.StatusOK {
		t.Fatalf("DELETE of web-3's move: %d %s", r.code, r.body)
	}
	if w := st.waited(); !slices.Equal(w, []int64{11, 11}) {
		t.Fatalf("waited for %v, want [11 11]", w)
	}
}
