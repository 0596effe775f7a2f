package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"pollbal/internal/defaults"
)

// Kinds of store, as /api/state names them.
const (
	KindEtcd   = "etcd"
	KindFile   = "file"
	KindMemory = "memory"
)

// Status is the store object of /api/state.
type Status struct {
	Kind     string `json:"kind"`
	Up       bool   `json:"up"`
	Revision int64  `json:"revision"`
}

// ErrUnavailable is returned by Put and Delete when etcd cannot be reached: nothing changed.
var ErrUnavailable = errors.New("store unavailable")

// Change is one move read from etcd: Pool is "" when the move was deleted.
type Change struct {
	ID       string
	Pool     string
	Revision int64
}

// Update is the whole set of moves after some changes, at Revision. Resync is true when it
// comes from reading everything (start, reconnect, compacted watch) rather than from the watch.
type Update struct {
	Moves    map[string]string
	Changes  []Change
	Revision int64
	Resync   bool
}

// Timings of the etcd follower.
const (
	probeInterval = 300 * time.Millisecond
	retryInterval = 500 * time.Millisecond
)

// EtcdOptions configure an Etcd store.
type EtcdOptions struct {
	Endpoints   []string
	Prefix      string // keys are <Prefix>moves/<backend id>
	DialTimeout time.Duration
	Username    string
	Password    string
	TLS         *tls.Config // nil: plain connections
	// Initial is the set of moves read from etcd last (the cache): Run's first read reports
	// its changes against it.
	Initial map[string]string
	// Apply receives every new set of moves, in revision order, from Run's goroutine.
	Apply func(Update)
	// Up is called from Run's goroutine each time etcd becomes reachable (true, after everything
	// was read) or unreachable (false, with why).
	Up     func(up bool, err error)
	Logger *slog.Logger
}

// Etcd is the etcd store. It is safe for concurrent use; Run follows etcd until its context ends.
type Etcd struct {
	o      EtcdOptions
	cli    *clientv3.Client
	prefix string // <Prefix>moves/

	mu       sync.Mutex
	up       bool
	revision int64 // the revision of the last update applied
	moves    map[string]string
	applied  chan struct{} // closed and replaced at each applied revision
}

// NewEtcd builds the client; it does not wait for etcd to answer.
func NewEtcd(o EtcdOptions) (*Etcd, error) {
	if o.Apply == nil || o.Up == nil {
		return nil, errors.New("store: Apply and Up are required")
	}
	o.Logger = defaults.Logger(o.Logger)
	initial := maps.Clone(o.Initial)
	if initial == nil {
		initial = map[string]string{}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            o.Endpoints,
		DialTimeout:          o.DialTimeout,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Username:             o.Username,
		Password:             o.Password,
		TLS:                  o.TLS,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &Etcd{o: o, cli: cli, prefix: o.Prefix + "moves/", moves: initial, applied: make(chan struct{})}, nil
}

// Close closes the client.
func (e *Etcd) Close() error { return e.cli.Close() }

// Key is the etcd key of a backend's move.
func (e *Etcd) Key(id string) string { return e.prefix + id }

// Status reports whether etcd is reachable and the revision applied last.
func (e *Etcd) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Status{Kind: KindEtcd, Up: e.up, Revision: e.revision}
}

// Put moves backend id to pool in etcd (a transaction) and returns its revision once committed.
func (e *Etcd) Put(ctx context.Context, id, pool string) (int64, error) {
	resp, err := e.commit(ctx, clientv3.OpPut(e.Key(id), pool))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// Delete drops backend id's move in etcd and returns the revision once committed, and whether
// etcd held a move to drop: when it did not, nothing changed and no watch event follows, so
// there is no revision of it to wait for.
func (e *Etcd) Delete(ctx context.Context, id string) (int64, bool, error) {
	resp, err := e.commit(ctx, clientv3.OpDelete(e.Key(id)))
	if err != nil {
		return 0, false, err
	}
	dropped := len(resp.Responses) == 1 && resp.Responses[0].GetResponseDeleteRange().GetDeleted() > 0
	return resp.Header.Revision, dropped, nil
}

func (e *Etcd) commit(ctx context.Context, op clientv3.Op) (*clientv3.TxnResponse, error) {
	if !e.Status().Up {
		return nil, ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, e.o.DialTimeout)
	defer cancel()
	resp, err := e.cli.Txn(ctx).Then(op).Commit()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return resp, nil
}

// WaitApplied waits until the revision rev was applied (or ctx ends) and reports whether it was.
func (e *Etcd) WaitApplied(ctx context.Context, rev int64) bool {
	for {
		e.mu.Lock()
		done, ch := e.revision >= rev, e.applied
		e.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// Run reads every move, then follows the watch; when etcd cannot be reached it reports it and
// keeps trying, and on reconnect (or a compacted watch revision) it reads everything again.
func (e *Etcd) Run(ctx context.Context) {
	wasUp := false
	report := func(up bool, err error) {
		if up == wasUp && (up || err == nil) {
			return
		}
		if up != wasUp {
			wasUp = up
			e.mu.Lock()
			e.up = up
			e.mu.Unlock()
		}
		e.o.Up(up, err)
	}
	first := true
	for ctx.Err() == nil {
		rev, err := e.resync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if wasUp || first {
				report(false, err)
			}
			first = false
			wait(ctx, retryInterval)
			continue
		}
		first = false
		report(true, nil)
		err = e.follow(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errCompacted) {
			e.o.Logger.Warn("etcd watch revision compacted; reading every move again", "err", err)
			continue
		}
		report(false, err)
		wait(ctx, retryInterval)
	}
}

var errCompacted = errors.New("watch revision compacted")

// resync reads every move and applies the whole set.
func (e *Etcd) resync(ctx context.Context) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, e.o.DialTimeout)
	defer cancel()
	resp, err := e.cli.Get(gctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	next := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		next[strings.TrimPrefix(string(kv.Key), e.prefix)] = string(kv.Value)
	}
	e.mu.Lock()
	old := e.moves
	e.mu.Unlock()
	var changes []Change
	for _, id := range slices.Sorted(maps.Keys(next)) {
		if old[id] != next[id] {
			changes = append(changes, Change{ID: id, Pool: next[id], Revision: resp.Header.Revision})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(old)) {
		if _, ok := next[id]; !ok {
			changes = append(changes, Change{ID: id, Revision: resp.Header.Revision})
		}
	}
	e.apply(next, changes, resp.Header.Revision, true)
	return resp.Header.Revision, nil
}

// follow applies the watch from rev+1 until it fails, its revision was compacted, or a probe
// finds etcd unreachable (a watch alone waits quietly through an outage).
func (e *Etcd) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := e.cli.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	probed := make(chan error, 1)
	probing := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, ok := <-wch:
			if !ok {
				return errors.New("etcd watch closed")
			}
			if resp.CompactRevision != 0 {
				return fmt.Errorf("%w (at %d)", errCompacted, resp.CompactRevision)
			}
			if err := resp.Err(); err != nil {
				return err
			}
			e.applyEvents(resp)
		case <-tick.C:
			if probing {
				continue
			}
			probing = true
			go func() {
				pctx, cancel := context.WithTimeout(ctx, e.o.DialTimeout)
				defer cancel()
				_, err := e.cli.Get(pctx, e.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
				probed <- err
			}()
		case err := <-probed:
			probing = false
			if err != nil {
				return err
			}
		}
	}
}

func (e *Etcd) applyEvents(resp clientv3.WatchResponse) {
	if len(resp.Events) == 0 {
		return
	}
	e.mu.Lock()
	next := maps.Clone(e.moves)
	e.mu.Unlock()
	changes := make([]Change, 0, len(resp.Events))
	for _, ev := range resp.Events {
		id := strings.TrimPrefix(string(ev.Kv.Key), e.prefix)
		c := Change{ID: id, Revision: ev.Kv.ModRevision}
		if ev.Type == clientv3.EventTypePut {
			c.Pool = string(ev.Kv.Value)
			next[id] = c.Pool
		} else {
			delete(next, id)
		}
		changes = append(changes, c)
	}
	e.apply(next, changes, changes[len(changes)-1].Revision, false)
}

// apply hands the new set to Apply, then records its revision and wakes WaitApplied.
func (e *Etcd) apply(moves map[string]string, changes []Change, rev int64, resync bool) {
	e.o.Apply(Update{Moves: maps.Clone(moves), Changes: changes, Revision: rev, Resync: resync})
	e.mu.Lock()
	e.moves = moves
	if rev > e.revision {
		e.revision = rev
	}
	close(e.applied)
	e.applied = make(chan struct{})
	e.mu.Unlock()
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
