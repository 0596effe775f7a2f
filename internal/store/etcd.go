package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Timings of the etcd store.
const (
	probeInterval = 300 * time.Millisecond
	retryInterval = 500 * time.Millisecond
	// applyWait bounds how long a move waits, after etcd committed it, for this instance's
	// watch to apply it before answering.
	applyWait = 2 * time.Second
)

// change is one move read from etcd: pool is "" when the move was deleted.
type change struct {
	id       string
	pool     string
	revision int64
}

// Etcd keeps the moves in etcd, shared by every instance that uses its prefix: a move is the key
// <prefix>moves/<backend id>, its value the pool. A move is committed in a transaction and comes
// back, on every instance, through the watch that Run follows; the valid moves read are applied
// to the target and kept in the cache (the state file), which the next start uses until etcd
// answers. Etcd is safe for concurrent use.
type Etcd struct {
	cli         *clientv3.Client
	prefix      string // <prefix>moves/
	dialTimeout time.Duration
	cache       *File
	target      Target
	alarms      Alarms
	events      Events
	up          prometheus.Gauge // pollbal_store_up
	log         *slog.Logger
	closeOnce   sync.Once
	closeErr    error

	mu        sync.Mutex
	reachable bool
	revision  int64         // the revision of the last set of moves applied
	moves     Moves         // the moves read from etcd last, valid or not
	applied   chan struct{} // closed and replaced at each applied revision
}

// newEtcd builds the client; it does not wait for etcd to answer. The gauge up starts at 0:
// etcd has not answered yet.
func newEtcd(o Options, creds credentials, cache *File, up prometheus.Gauge) (*Etcd, error) {
	initial := maps.Clone(o.Initial)
	if initial == nil {
		initial = Moves{}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            o.Etcd.Endpoints,
		DialTimeout:          o.Etcd.DialTimeout,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Username:             o.Etcd.Username,
		Password:             creds.password,
		TLS:                  creds.tls,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &Etcd{
		cli: cli, prefix: o.Etcd.Prefix + "moves/", dialTimeout: o.Etcd.DialTimeout,
		cache: cache, target: o.Target, alarms: o.Alarms, events: o.Events, up: up, log: o.Logger,
		moves: initial, applied: make(chan struct{}),
	}, nil
}

// Close closes the client; it is idempotent.
func (e *Etcd) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.cli.Close() })
	return e.closeErr
}

// key is the etcd key of a backend's move.
func (e *Etcd) key(id string) string { return e.prefix + id }

// Status reports whether etcd is reachable and the revision applied last.
func (e *Etcd) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Status{Kind: KindEtcd, Up: e.reachable, Revision: e.revision}
}

// SetStateFile makes path the cache's state file (File.SetStateFile).
func (e *Etcd) SetStateFile(path string) error { return e.cache.SetStateFile(path) }

// Set writes the move to etcd and answers once this instance applied it (setShared).
func (e *Etcd) Set(ctx context.Context, id, pool string) (int64, error) {
	return setShared(ctx, e, e.target, e.log, id, pool)
}

// Clear drops the move in etcd and answers once this instance applied that (clearShared).
func (e *Etcd) Clear(ctx context.Context, id string) (int64, error) {
	return clearShared(ctx, e, e.target, e.log, id)
}

// shared is the write side of a shared store of moves: Etcd, or a test's stand-in.
type shared interface {
	// put and drop write a move and return its revision once committed; an error wrapping
	// ErrUnavailable means nothing changed. drop also says whether the store held a move to
	// drop: when it did not, no update for the revision will come.
	put(ctx context.Context, id, pool string) (int64, error)
	drop(ctx context.Context, id string) (rev int64, dropped bool, err error)
	// waitApplied waits until this instance applied revision rev.
	waitApplied(ctx context.Context, rev int64) bool
}

// setShared writes a move of a configured backend to a shared store and returns its revision
// once this instance applied it.
func setShared(ctx context.Context, s shared, target Target, log *slog.Logger, id, pool string) (int64, error) {
	if err := checkPool(pool); err != nil {
		return 0, err
	}
	if !target.Known(id) {
		return 0, unknownBackend(id)
	}
	rev, err := s.put(ctx, id, pool)
	if err != nil {
		return 0, err
	}
	awaitApplied(ctx, s, log, id, rev)
	return rev, nil
}

// clearShared drops a backend's move in a shared store and returns the revision of the drop
// (0 when the store held no move) once this instance applied it.
func clearShared(ctx context.Context, s shared, target Target, log *slog.Logger, id string) (int64, error) {
	if _, moved := target.Overrides()[id]; !moved && !target.Known(id) {
		return 0, unknownBackend(id)
	}
	rev, dropped, err := s.drop(ctx, id)
	if err != nil {
		return 0, err
	}
	// With no move in the store and none applied here, the answer is ready: nothing changed and
	// no update will come. A move still applied here was dropped by another instance just now;
	// the watch is delivering that.
	if _, applied := target.Overrides()[id]; dropped || applied {
		awaitApplied(ctx, s, log, id, rev)
	}
	if !dropped {
		return 0, nil
	}
	return rev, nil
}

// awaitApplied waits, up to applyWait, for this instance to apply revision rev; past that the
// move applies when the watch delivers it.
func awaitApplied(ctx context.Context, s shared, log *slog.Logger, id string, rev int64) {
	wctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	if !s.waitApplied(wctx, rev) {
		log.Warn("a committed move was not applied here in time; it applies when the watch delivers it",
			"backend", id, "revision", rev)
	}
}

// put moves backend id to pool in etcd (a transaction) and returns its revision once committed.
func (e *Etcd) put(ctx context.Context, id, pool string) (int64, error) {
	resp, err := e.commit(ctx, clientv3.OpPut(e.key(id), pool))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// drop deletes backend id's move in etcd and returns the revision once committed, and whether
// etcd held a move to drop: when it did not, nothing changed and no watch event follows, so
// there is no revision of it to wait for.
func (e *Etcd) drop(ctx context.Context, id string) (int64, bool, error) {
	resp, err := e.commit(ctx, clientv3.OpDelete(e.key(id)))
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
	ctx, cancel := context.WithTimeout(ctx, e.dialTimeout)
	defer cancel()
	resp, err := e.cli.Txn(ctx).Then(op).Commit()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return resp, nil
}

// waitApplied waits until the revision rev was applied (or ctx ends) and reports whether it was.
func (e *Etcd) waitApplied(ctx context.Context, rev int64) bool {
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
// keeps trying, and on reconnect (or a compacted watch revision) it reads everything again. It
// returns nil when ctx ends.
func (e *Etcd) Run(ctx context.Context) error {
	wasUp := false
	report := func(up bool, err error) {
		if up == wasUp && (up || err == nil) {
			return
		}
		if up != wasUp {
			wasUp = up
			e.mu.Lock()
			e.reachable = up
			e.mu.Unlock()
		}
		e.reachableChanged(up, err)
	}
	first := true
	for ctx.Err() == nil {
		rev, err := e.resync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
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
			return nil
		}
		if errors.Is(err, errCompacted) {
			e.log.Warn("etcd watch revision compacted; reading every move again", "err", err)
			continue
		}
		report(false, err)
		wait(ctx, retryInterval)
	}
	return nil
}

// reachableChanged follows etcd's reachability: the gauge, and a log line and an event when it
// can be reached (everything was read), or the deduplicated store_unavailable alarm when not.
func (e *Etcd) reachableChanged(up bool, err error) {
	if up {
		e.up.Set(1)
		e.log.Info("etcd store reachable: every move read", "revision", e.Status().Revision)
		e.events.Add("store", "etcd reachable again: every move read")
		return
	}
	e.up.Set(0)
	why := "unreachable"
	if err != nil {
		why = err.Error()
	}
	e.alarms.StoreUnavailable(why)
}

var errCompacted = errors.New("watch revision compacted")

// resync reads every move and applies the whole set.
func (e *Etcd) resync(ctx context.Context) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, e.dialTimeout)
	defer cancel()
	resp, err := e.cli.Get(gctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	next := make(Moves, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		next[strings.TrimPrefix(string(kv.Key), e.prefix)] = string(kv.Value)
	}
	e.mu.Lock()
	old := e.moves
	e.mu.Unlock()
	var changes []change
	for _, id := range slices.Sorted(maps.Keys(next)) {
		if old[id] != next[id] {
			changes = append(changes, change{id: id, pool: next[id], revision: resp.Header.Revision})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(old)) {
		if _, ok := next[id]; !ok {
			changes = append(changes, change{id: id, revision: resp.Header.Revision})
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
				pctx, cancel := context.WithTimeout(ctx, e.dialTimeout)
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
	changes := make([]change, 0, len(resp.Events))
	for _, ev := range resp.Events {
		id := strings.TrimPrefix(string(ev.Kv.Key), e.prefix)
		c := change{id: id, revision: ev.Kv.ModRevision}
		if ev.Type == clientv3.EventTypePut {
			c.pool = string(ev.Kv.Value)
			next[id] = c.pool
		} else {
			delete(next, id)
		}
		changes = append(changes, c)
	}
	e.apply(next, changes, changes[len(changes)-1].revision, false)
}

// apply applies a set of moves read from etcd, at revision rev: the valid ones replace the
// target's overrides and the cache's, and each change applied is written to the log as an
// audit line with its revision. Then it records the revision and wakes waitApplied. resync says
// the set comes from reading everything (start, reconnect, compacted watch) rather than from
// the watch.
func (e *Etcd) apply(moves Moves, changes []change, rev int64, resync bool) {
	e.cache.replace(validMoves(moves, e.log))
	for _, c := range changes {
		if c.pool != "" && Validate(c.id, c.pool) != nil {
			continue // ignored above, not applied
		}
		action := ActionMove
		if c.pool == "" {
			action = ActionClear
		}
		e.log.LogAttrs(context.Background(), slog.LevelInfo, "admin move applied",
			slog.String("source", KindEtcd), slog.String("action", action), slog.String("target", c.id),
			slog.String("pool", c.pool), slog.Int64("revision", c.revision), slog.Bool("resync", resync))
	}
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
