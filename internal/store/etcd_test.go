package store

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"pollbal/configs"
	"pollbal/internal/testetcd"
	"pollbal/internal/testproc"
)

// newEtcdStore builds an etcd store on endpoint over target, with a state file of its own as
// the cache, logging to log; it does not run it.
func newEtcdStore(t *testing.T, endpoint string, target *fakeTarget, log *jsonLog, initial Moves) *Etcd {
	t.Helper()
	st, err := New(Options{
		StateFile: filepath.Join(t.TempDir(), "state.json"),
		Etcd:      &configs.Etcd{Endpoints: []string{endpoint}, Prefix: "/test/", DialTimeout: time.Second},
		Initial:   initial, Target: target, Alarms: target, Events: target, Logger: log.logger(), Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.(*Etcd)
}

// follower is a running etcd store over a target of its own.
type follower struct {
	*Etcd
	target *fakeTarget
	log    *jsonLog
}

func newFollower(t *testing.T, endpoint string, initial Moves) *follower {
	t.Helper()
	f := &follower{target: newTarget("web-1", "web-2"), log: &jsonLog{}}
	f.Etcd = newEtcdStore(t, endpoint, f.target, f.log, initial)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// waitFor polls cond on the target's moves and reported reachability until it holds; it fails
// after limit.
func (f *follower) waitFor(t *testing.T, what string, limit time.Duration, cond func(moves map[string]string, ups []bool) bool) time.Duration {
	t.Helper()
	return testproc.WaitFor(t, limit, what, func() bool { return cond(f.target.state()) })
}

func isUp(_ map[string]string, ups []bool) bool { return len(ups) > 0 && ups[len(ups)-1] }

func rawClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestEtcdMovesReachEveryFollower(t *testing.T) {
	srv := testetcd.Start(t)
	a := newFollower(t, srv.Client, nil)
	b := newFollower(t, srv.Client, Moves{"web-9": "pool-old"})
	for _, f := range []*follower{a, b} {
		f.waitFor(t, "up", 10*time.Second, isUp)
	}
	// The cache's move is not in etcd: the first read drops it.
	b.waitFor(t, "cached move dropped", 5*time.Second, func(m map[string]string, _ []bool) bool { _, ok := m["web-9"]; return !ok })

	ctx := context.Background()
	rev, err := a.Set(ctx, "web-1", "unassigned")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := a.target.state(); got["web-1"] != "unassigned" {
		t.Fatalf("Set returned before a applied its own move: %v", got)
	}
	// The revision is recorded after the moves are applied, the cache written and the audit
	// lines logged.
	took := testproc.WaitFor(t, 5*time.Second, "move applied by b", func() bool { return b.Status().Revision >= rev })
	t.Logf("a move on one follower reached the other in %s", took)
	if m, _ := b.target.state(); m["web-1"] != "unassigned" {
		t.Errorf("b holds %v, want web-1 moved", m)
	}
	audits := b.log.Records(t, "admin move applied")
	if last := audits[len(audits)-1]; last["target"] != "web-1" || last["pool"] != "unassigned" || last["action"] != "move" ||
		last["revision"] != float64(rev) || last["source"] != "etcd" || last["resync"] != false {
		t.Errorf("b's audit line %v, want web-1 → unassigned at %d", last, rev)
	}
	if st := b.Status(); st != (Status{Kind: KindEtcd, Up: true, Revision: rev}) {
		t.Errorf("b's status %+v", st)
	}
	if got := readState(t, b.cache.path); !maps.Equal(got, Moves{"web-1": "unassigned"}) {
		t.Errorf("b's cache holds %v, want the move read", got)
	}

	got, err := rawClient(t, srv.Client).Get(ctx, "/test/moves/web-1")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "unassigned" {
		t.Fatalf("etcd holds %v (%v), want the key /test/moves/web-1 = unassigned", got, err)
	}

	rev, dropped, err := b.drop(ctx, "web-1")
	if err != nil || !dropped {
		t.Fatalf("drop of a move = %d, %t, %v; want dropped", rev, dropped, err)
	}
	// The revision is recorded after the moves are applied.
	testproc.WaitFor(t, 5*time.Second, "delete applied by a", func() bool { return a.Status().Revision >= rev })
	if st := a.Status(); st.Revision != rev {
		t.Errorf("a's revision %d, want %d", st.Revision, rev)
	}
	if m, _ := a.target.state(); m["web-1"] != "" {
		t.Errorf("a holds %v after the delete", m)
	}

	// Dropping a move that is not there changes nothing: no watch event follows, and a write
	// outside the prefix has moved etcd's revision past anything a follower applies, so a
	// caller waiting for the returned revision would wait in vain. drop says so.
	if _, err := rawClient(t, srv.Client).Put(ctx, "/elsewhere/key", "x"); err != nil {
		t.Fatal(err)
	}
	rev, dropped, err = b.drop(ctx, "web-1")
	if err != nil || dropped {
		t.Fatalf("drop of no move = %d, %t, %v; want not dropped", rev, dropped, err)
	}
	if applied := b.Status().Revision; rev <= applied {
		t.Errorf("revision of the no-op drop %d, want past the applied %d (else this test shows nothing)", rev, applied)
	}
	// Clear of no move answers at once, with no revision: nothing was written.
	if rev, err := b.Clear(ctx, "web-1"); err != nil || rev != 0 {
		t.Errorf("Clear of no move = %d, %v; want 0, nil", rev, err)
	}
}

func TestEtcdOutage(t *testing.T) {
	srv := testetcd.Start(t)
	f := newFollower(t, srv.Client, nil)
	f.waitFor(t, "up", 10*time.Second, func(_ map[string]string, ups []bool) bool { return slices.Equal(ups, []bool{true}) })
	if v := testutil.ToFloat64(f.up); v != 1 {
		t.Errorf("pollbal_store_up %v while etcd answers, want 1", v)
	}
	ctx := context.Background()
	if _, err := f.Set(ctx, "web-1", "pool-a"); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	f.waitFor(t, "down", 5*time.Second, func(_ map[string]string, ups []bool) bool { return slices.Equal(ups, []bool{true, false}) })
	if _, err := f.Set(ctx, "web-2", "pool-b"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Set during the outage: %v, want ErrUnavailable", err)
	}
	if _, err := f.Clear(ctx, "web-1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Clear during the outage: %v, want ErrUnavailable", err)
	}
	if st := f.Status(); st.Up {
		t.Errorf("status %+v during the outage", st)
	}
	if v := testutil.ToFloat64(f.up); v != 0 {
		t.Errorf("pollbal_store_up %v during the outage, want 0", v)
	}
	if kept, _ := f.target.state(); !maps.Equal(kept, map[string]string{"web-1": "pool-a"}) {
		t.Errorf("moves during the outage %v", kept)
	}

	srv.Serve(srv.Client)
	f.waitFor(t, "up again", 15*time.Second, func(_ map[string]string, ups []bool) bool { return slices.Equal(ups, []bool{true, false, true}) })
	if _, err := f.Set(ctx, "web-2", "pool-b"); err != nil {
		t.Fatalf("Set after reconnect: %v", err)
	}
	if got, _ := f.target.state(); !maps.Equal(got, map[string]string{"web-1": "pool-a", "web-2": "pool-b"}) {
		t.Errorf("moves after reconnect %v", got)
	}
	if lines := f.log.Records(t, "etcd store reachable: every move read"); len(lines) != 2 {
		t.Errorf("%d log lines saying etcd is reachable, want 2 (start, reconnect)", len(lines))
	}
}

// A watch from a compacted revision ends with errCompacted, which Run answers by reading
// everything again.
func TestEtcdCompactedWatch(t *testing.T) {
	srv := testetcd.Start(t)
	cli := rawClient(t, srv.Client)
	ctx := context.Background()
	first, err := cli.Put(ctx, "/test/moves/web-1", "pool-a")
	if err != nil {
		t.Fatal(err)
	}
	last, err := cli.Put(ctx, "/test/moves/web-1", "pool-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, last.Header.Revision); err != nil {
		t.Fatal(err)
	}
	st := newEtcdStore(t, srv.Client, newTarget(), &jsonLog{}, nil)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := st.follow(fctx, first.Header.Revision-1); !errors.Is(err, errCompacted) {
		t.Fatalf("follow from a compacted revision: %v, want errCompacted", err)
	}
	rev, err := st.resync(fctx)
	if err != nil || rev != last.Header.Revision {
		t.Fatalf("resync: revision %d, %v; want %d", rev, err, last.Header.Revision)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.moves["web-1"] != "pool-b" {
		t.Errorf("after resync: %v", st.moves)
	}
}

// apply gives the target the whole set, keeps it in the state file as the cache, and writes an
// audit line per change with its revision.
func TestEtcdApply(t *testing.T) {
	target := newTarget("web-1", "web-3")
	target.moves = map[string]string{"web-3": "unassigned"}
	log := &jsonLog{}
	e := newEtcdStore(t, testproc.FreeAddr(t), target, log, nil)
	moves := Moves{"web-1": "canary", "elsewhere-9": "unassigned"}
	e.apply(moves, []change{
		{id: "web-1", pool: "canary", revision: 7}, {id: "elsewhere-9", pool: "unassigned", revision: 6}, {id: "web-3", revision: 5},
	}, 7, false)
	if got, _ := target.state(); !maps.Equal(got, moves) {
		t.Errorf("target holds %v, want %v", got, moves)
	}
	if got := readState(t, e.cache.path); !maps.Equal(got, moves) {
		t.Errorf("state file %v, want the moves read", got)
	}
	if st := e.Status(); st.Revision != 7 {
		t.Errorf("status %+v, want revision 7", st)
	}
	lines := log.Records(t, "admin move applied")
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
// the same ones the target gets.
func TestEtcdApplyCachesOnlyValidMoves(t *testing.T) {
	target := newTarget("web-1", "web-2", "web-3")
	log := &jsonLog{}
	e := newEtcdStore(t, testproc.FreeAddr(t), target, log, nil)
	e.apply(Moves{"web-1": "canary", "web-2": "Not A Pool", "": "canary", "a/b": "canary", "web-3": ""}, []change{
		{id: "web-1", pool: "canary", revision: 5}, {id: "web-2", pool: "Not A Pool", revision: 6},
		{id: "a/b", pool: "canary", revision: 7}, {id: "web-3", pool: "", revision: 8},
	}, 9, true)
	want := map[string]string{"web-1": "canary"}
	if got, _ := target.state(); !maps.Equal(got, want) {
		t.Errorf("target holds %v, want %v", got, want)
	}
	got, err := ReadState(e.cache.path)
	if err != nil {
		t.Fatalf("the state file written from the shared store cannot be read back: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("state file %v, want %v", got, want)
	}
	// The audit lines name what was applied: the move of web-1 and the drop of web-3's move.
	lines := log.Records(t, "admin move applied")
	if len(lines) != 2 || lines[0]["target"] != "web-1" || lines[1]["target"] != "web-3" || lines[0]["resync"] != true {
		t.Errorf("audit lines %v, want web-1's move and web-3's clear only, from a resync", lines)
	}
	if ignored := log.Records(t, "ignoring a shared move that is not a backend id and a pool name"); len(ignored) != 4 {
		t.Errorf("%d warnings for the moves ignored, want 4: %v", len(ignored), ignored)
	}
}

// committingStore is a shared store of moves that commits every write at once but has no
// watch: nothing it commits is ever applied by itself. It records the revisions waitApplied was
// asked for, and answers at once. It is safe for concurrent use.
type committingStore struct {
	mu    sync.Mutex
	moves map[string]string
	rev   int64
	waits []int64
}

func (s *committingStore) put(_ context.Context, id, pool string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.moves[id] = pool
	return s.rev, nil
}

func (s *committingStore) drop(_ context.Context, id string) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.moves[id]; !ok {
		return s.rev, false, nil
	}
	s.rev++
	delete(s.moves, id)
	return s.rev, true, nil
}

func (s *committingStore) waitApplied(_ context.Context, rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, rev)
	return true
}

func (s *committingStore) waited() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

// Regression: DELETE of a move that the shared store does not hold waited the whole applyWait
// (2 s) for this instance to apply a revision no update would ever bring (a no-op delete
// creates no watch event). It answers at once now, as a local DELETE of nothing does; a delete
// that dropped a move, or one whose move is still applied here, still waits.
func TestClearSharedOfNoMoveAnswersAtOnce(t *testing.T) {
	st := &committingStore{moves: map[string]string{"web-2": "canary"}, rev: 10}
	target := newTarget("web-1", "web-2", "web-3")
	target.moves = map[string]string{"web-2": "canary", "web-3": "unassigned"}
	log := (&jsonLog{}).logger()
	ctx := context.Background()

	if rev, err := clearShared(ctx, st, target, log, "web-1"); err != nil || rev != 0 {
		t.Fatalf("clear of no move = %d, %v; want 0 (nothing committed), nil", rev, err)
	}
	if w := st.waited(); len(w) != 0 {
		t.Fatalf("clear of no move waited for revisions %v, want no wait", w)
	}

	// A move the store held: dropped at revision 11, which the answer waits for.
	if rev, err := clearShared(ctx, st, target, log, "web-2"); err != nil || rev != 11 {
		t.Fatalf("clear of web-2's move = %d, %v; want 11", rev, err)
	}
	if w := st.waited(); !slices.Equal(w, []int64{11}) {
		t.Fatalf("waited for %v, want [11]", w)
	}

	// Not in the store but still applied here (another instance dropped it; the watch has not
	// delivered that yet): the answer waits for the update that removes it.
	if rev, err := clearShared(ctx, st, target, log, "web-3"); err != nil || rev != 0 {
		t.Fatalf("clear of web-3's move = %d, %v; want 0 (nothing committed)", rev, err)
	}
	if w := st.waited(); !slices.Equal(w, []int64{11, 11}) {
		t.Fatalf("waited for %v, want [11 11]", w)
	}
}

// Set and Clear on a shared store check the move as File does, before anything is written.
func TestSharedRefusesBeforeWriting(t *testing.T) {
	st := &committingStore{moves: map[string]string{}}
	target := newTarget("web-1")
	target.moves = map[string]string{"gone-1": "canary"}
	log := (&jsonLog{}).logger()
	ctx := context.Background()
	tests := []struct {
		name string
		call func() (int64, error)
		want error
	}{
		{name: "invalid pool", call: func() (int64, error) { return setShared(ctx, st, target, log, "web-1", "Not A Pool") }, want: ErrInvalidPool},
		{name: "unknown backend", call: func() (int64, error) { return setShared(ctx, st, target, log, "web-9", "canary") }, want: ErrUnknownBackend},
		{name: "clear of an unknown backend without a move", call: func() (int64, error) { return clearShared(ctx, st, target, log, "web-9") }, want: ErrUnknownBackend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if st.rev != 0 {
				t.Fatalf("the store was written (revision %d)", st.rev)
			}
		})
	}
	// A move left behind for a backend a reload removed can be dropped.
	if _, err := clearShared(ctx, st, target, log, "gone-1"); err != nil {
		t.Errorf("clear of a move left behind: %v", err)
	}
}
