package store

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"pollbal/internal/testetcd"
	"pollbal/internal/testproc"
)

// follower is a running Etcd store with what it reported.
type follower struct {
	*Etcd
	mu      sync.Mutex
	moves   map[string]string
	changes []Change
	ups     []bool
}

func newFollower(t *testing.T, endpoint string, initial map[string]string) *follower {
	t.Helper()
	f := &follower{}
	st, err := NewEtcd(EtcdOptions{
		Endpoints: []string{endpoint}, Prefix: "/test/", DialTimeout: time.Second, Initial: initial,
		Apply: func(u Update) {
			f.mu.Lock()
			f.moves = u.Moves
			f.changes = append(f.changes, u.Changes...)
			f.mu.Unlock()
		},
		Up: func(up bool, _ error) {
			f.mu.Lock()
			f.ups = append(f.ups, up)
			f.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Etcd = st
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	return f
}

// waitFor polls cond, under the follower's lock, until it holds; it fails after limit.
func (f *follower) waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	return testproc.WaitFor(t, limit, what, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return cond()
	})
}

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
	b := newFollower(t, srv.Client, map[string]string{"web-9": "pool-old"})
	for _, f := range []*follower{a, b} {
		f.waitFor(t, "up", 10*time.Second, func() bool { return len(f.ups) > 0 && f.ups[len(f.ups)-1] })
	}
	// The cache's move is not in etcd: the first read drops it.
	b.waitFor(t, "cached move dropped", 5*time.Second, func() bool { _, ok := b.moves["web-9"]; return !ok })

	ctx := context.Background()
	rev, err := a.Put(ctx, "web-1", "unassigned")
	if err != nil {
		t.Fatal(err)
	}
	if !a.WaitApplied(ctx, rev) {
		t.Fatal("WaitApplied returned false")
	}
	took := b.waitFor(t, "move seen by b", 5*time.Second, func() bool { return b.moves["web-1"] == "unassigned" })
	t.Logf("a move on one follower reached the other in %s", took)
	b.mu.Lock()
	last := b.changes[len(b.changes)-1]
	b.mu.Unlock()
	if last != (Change{ID: "web-1", Pool: "unassigned", Revision: rev}) {
		t.Errorf("b's change %+v, want web-1 → unassigned at %d", last, rev)
	}
	if st := b.Status(); st != (Status{Kind: KindEtcd, Up: true, Revision: rev}) {
		t.Errorf("b's status %+v", st)
	}

	got, err := rawClient(t, srv.Client).Get(ctx, "/test/moves/web-1")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "unassigned" {
		t.Fatalf("etcd holds %v (%v), want the key /test/moves/web-1 = unassigned", got, err)
	}

	rev, dropped, err := b.Delete(ctx, "web-1")
	if err != nil || !dropped {
		t.Fatalf("Delete of a move = %d, %t, %v; want dropped", rev, dropped, err)
	}
	a.waitFor(t, "delete seen by a", 5*time.Second, func() bool { _, ok := a.moves["web-1"]; return !ok })
	if st := a.Status(); st.Revision != rev {
		t.Errorf("a's revision %d, want %d", st.Revision, rev)
	}

	// Deleting a move that is not there changes nothing: no watch event follows, and a write
	// outside the prefix has moved etcd's revision past anything a follower applies, so a
	// caller waiting for the returned revision would wait in vain. Delete says so.
	if _, err := rawClient(t, srv.Client).Put(ctx, "/elsewhere/key", "x"); err != nil {
		t.Fatal(err)
	}
	rev, dropped, err = b.Delete(ctx, "web-1")
	if err != nil || dropped {
		t.Fatalf("Delete of no move = %d, %t, %v; want not dropped", rev, dropped, err)
	}
	if applied := b.Status().Revision; rev <= applied {
		t.Errorf("revision of the no-op delete %d, want past the applied %d (else this test shows nothing)", rev, applied)
	}
}

func TestEtcdOutage(t *testing.T) {
	srv := testetcd.Start(t)
	f := newFollower(t, srv.Client, nil)
	f.waitFor(t, "up", 10*time.Second, func() bool { return len(f.ups) == 1 && f.ups[0] })
	ctx := context.Background()
	if _, err := f.Put(ctx, "web-1", "pool-a"); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "move applied", 5*time.Second, func() bool { return f.moves["web-1"] == "pool-a" })

	srv.Stop()
	f.waitFor(t, "down", 5*time.Second, func() bool { return len(f.ups) == 2 && !f.ups[1] })
	if _, err := f.Put(ctx, "web-2", "pool-b"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Put during the outage: %v, want ErrUnavailable", err)
	}
	if st := f.Status(); st.Up {
		t.Errorf("status %+v during the outage", st)
	}
	f.mu.Lock()
	kept := maps.Clone(f.moves)
	f.mu.Unlock()
	if !maps.Equal(kept, map[string]string{"web-1": "pool-a"}) {
		t.Errorf("moves during the outage %v", kept)
	}

	srv.Serve(srv.Client)
	f.waitFor(t, "up again", 15*time.Second, func() bool { return len(f.ups) == 3 && f.ups[2] })
	if _, err := f.Put(ctx, "web-2", "pool-b"); err != nil {
		t.Fatalf("Put after reconnect: %v", err)
	}
	f.waitFor(t, "move after reconnect", 5*time.Second, func() bool { return f.moves["web-2"] == "pool-b" && f.moves["web-1"] == "pool-a" })
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
	st, err := NewEtcd(EtcdOptions{Endpoints: []string{srv.Client}, Prefix: "/test/", DialTimeout: time.Second,
		Apply: func(Update) {}, Up: func(bool, error) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
