package balancer

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/metric"
)

// Errors of Wait; the proxy answers them 503 queue_full and queue_timeout. A waiter whose client
// went away gets ErrGone.
var (
	ErrQueueFull    = errors.New("queue full")
	ErrQueueTimeout = errors.New("queue timeout")
	ErrGone         = errors.New("client gone while queued")
)

// queueCheckEvery is how often a waiter asks whether its client is still there.
const queueCheckEvery = 20 * time.Millisecond

// waitQueues holds the FIFO queues of requests waiting for a slot, one per pool and service: a
// component of the balancer that the proxy calls through Balancer.Wait. They outlive snapshots:
// a reload keeps the waiters and wakes those that now fit, and a waiter is served from the
// snapshot current when a slot comes, which may be newer than the one its request read. waiting
// is the number of waiters over all queues: the one atomic load a release pays while it is 0.
// Slots are handed over directly: a release that finds waiters keeps the slot taken and gives
// it (or a slot the waiter's selection prefers) to the oldest waiter that can use it, so a new
// arrival never takes a slot ahead of a waiter. It is safe for concurrent use.
type waitQueues struct {
	waiting  atomic.Int64
	cur      *atomic.Pointer[Snapshot] // where the balancer publishes the current snapshot
	now      func() time.Time
	observer Observer // hears the fallbacks of the leases it hands over

	mu     sync.Mutex // guards the fields below
	seq    uint64
	byKey  map[[2]string][]*waiter // pool, service → waiters, oldest first
	length *prometheus.Desc
	wait   *prometheus.HistogramVec
}

// waiter is one queued request. ch receives its lease exactly once, under mu.
type waiter struct {
	app     string
	key     [2]string
	seq     uint64
	ch      chan Lease
	served  bool
	started time.Time
}

func newWaitQueues(cur *atomic.Pointer[Snapshot], now func() time.Time, obs Observer, reg prometheus.Registerer) (*waitQueues, error) {
	q := &waitQueues{
		cur:      cur,
		now:      now,
		observer: obs,
		byKey:    map[[2]string][]*waiter{},
		length: prometheus.NewDesc("pollbal_queue_length",
			"Requests waiting for a free slot of the pool for the service (proxy.queue_timeout).", []string{"pool", "service"}, nil),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pollbal_queue_wait_seconds",
			Help:    "Time queued requests waited for a slot, whatever the result (served, timed out, full is not counted, client gone).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"pool"}),
	}
	if err := metric.Register(reg, q, q.wait); err != nil {
		return nil, fmt.Errorf("register queue metrics: %w", err)
	}
	return q, nil
}

// QueueLength returns how many requests wait for a slot of pool, over all services.
func (b *Balancer) QueueLength(pool string) int {
	q := b.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for k, ws := range q.byKey {
		if k[0] == pool {
			n += len(ws)
		}
	}
	return n
}

// Wait queues a request for app (of snap, the request's snapshot, whose proxy settings apply)
// that found no available candidate, for up to proxy.queue_timeout, and returns the lease it
// was handed. That lease is taken from the snapshot current when a slot came, which may be newer
// than snap (a reload or a move in between): its Backend and Pool are those of that snapshot.
// Wait returns ErrNoCandidate at once when the queue is off (queue_timeout 0) or neither the
// app's pool nor its fallback has a ready backend for the service, ErrQueueFull when the app's
// pool already has max_queue waiters for the service, ErrQueueTimeout after queue_timeout, and
// ErrGone as soon as gone (called every queueCheckEvery; may be nil) reports that the client
// went away.
func (b *Balancer) Wait(snap *Snapshot, app *App, gone func() bool) (Lease, error) {
	timeout := snap.cfg.Proxy.QueueTimeout
	if timeout <= 0 || !(hasReady(app.primary) || hasReady(app.fallback)) {
		return Lease{}, ErrNoCandidate
	}
	q := b.queues
	key := [2]string{app.Pool, app.Service}
	w := &waiter{app: app.Name, key: key, ch: make(chan Lease, 1), started: q.now()}
	q.mu.Lock()
	if len(q.byKey[key]) >= snap.cfg.Proxy.MaxQueue {
		q.mu.Unlock()
		return Lease{}, ErrQueueFull
	}
	q.seq++
	w.seq = q.seq
	q.byKey[key] = append(q.byKey[key], w)
	q.waiting.Add(1)
	// A release before the increment above did not look at the queue: try once now.
	q.dispatchLocked()
	q.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var tick *time.Ticker
	var tc <-chan time.Time
	if gone != nil {
		tick = time.NewTicker(queueCheckEvery)
		defer tick.Stop()
		tc = tick.C
	}
	for {
		select {
		case l := <-w.ch:
			q.observe(w)
			return l, nil
		case <-timer.C:
			if l, ok := q.leave(w); ok {
				return l, nil
			}
			return Lease{}, ErrQueueTimeout
		case <-tc:
			if !gone() {
				continue
			}
			if l, ok := q.leave(w); ok {
				l.Release()
			}
			return Lease{}, ErrGone
		}
	}
}

func (q *waitQueues) observe(w *waiter) {
	q.wait.WithLabelValues(w.key[0]).Observe(q.now().Sub(w.started).Seconds())
}

// leave takes w out of its queue; when it was served meanwhile, it returns the lease instead.
func (q *waitQueues) leave(w *waiter) (Lease, bool) {
	q.mu.Lock()
	if w.served {
		q.mu.Unlock()
		q.observe(w)
		return <-w.ch, true
	}
	ws := q.byKey[w.key]
	for i, x := range ws {
		if x == w {
			q.remove(w.key, i)
			break
		}
	}
	q.mu.Unlock()
	q.observe(w)
	return Lease{}, false
}

// remove drops the i-th waiter of key; the caller holds mu.
func (q *waitQueues) remove(key [2]string, i int) {
	ws := q.byKey[key]
	copy(ws[i:], ws[i+1:])
	ws[len(ws)-1] = nil
	ws = ws[:len(ws)-1]
	if len(ws) == 0 {
		delete(q.byKey, key)
	} else {
		q.byKey[key] = ws
	}
	q.waiting.Add(-1)
}

// wake serves the waiters that fit now: after a release (the released slot goes to the oldest
// waiter that can use it: a new arrival does not take it first, since Acquire sends arrivals to
// the queue while anyone waits, ErrBehindWaiters), a reload or a health change.
func (q *waitQueues) wake() {
	if q.waiting.Load() == 0 {
		return
	}
	q.mu.Lock()
	q.dispatchLocked()
	q.mu.Unlock()
}

// dispatchLocked hands slots to waiters, the oldest first: each queue is served in FIFO order
// until its oldest waiter finds no slot; queues are visited by the age of their oldest waiter.
// The caller holds mu.
func (q *waitQueues) dispatchLocked() {
	if len(q.byKey) == 0 {
		return
	}
	snap := q.cur.Load()
	keys := make([][2]string, 0, len(q.byKey))
	for k := range q.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return q.byKey[keys[i]][0].seq < q.byKey[keys[j]][0].seq })
	for _, k := range keys {
		for len(q.byKey[k]) > 0 {
			w := q.byKey[k][0]
			app := snap.AppByName(w.app)
			if app == nil {
				break // the app left with a reload: its waiters time out
			}
			l, err := acquire(snap, app, nil, q.now, q.observer)
			if err != nil {
				break
			}
			q.remove(k, 0)
			w.served = true
			w.ch <- l
		}
	}
}

// hasReady reports whether l's current candidate set has a ready member, whatever its slots.
func hasReady(l *candList) bool {
	if l == nil {
		return false
	}
	set := l.current()
	return len(set.groups[0].members)+len(set.groups[1].members) > 0
}

// Describe implements prometheus.Collector.
func (q *waitQueues) Describe(ch chan<- *prometheus.Desc) { ch <- q.length }

// Collect implements prometheus.Collector: the queue length of every pool and service of the
// current snapshot (0 when nobody waits), and of any other that still has waiters.
func (q *waitQueues) Collect(ch chan<- prometheus.Metric) {
	snap := q.cur.Load()
	q.mu.Lock()
	n := make(map[[2]string]int, len(snap.lists)+len(q.byKey))
	for k := range snap.lists {
		n[k] = 0
	}
	for k, ws := range q.byKey {
		n[k] = len(ws)
	}
	q.mu.Unlock()
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(q.length, prometheus.GaugeValue, float64(v), k[0], k[1])
	}
}

// touch makes the wait histogram of every pool of snap visible before its first wait.
func (q *waitQueues) touch(snap *Snapshot) {
	for pool := range snap.byPool {
		q.wait.WithLabelValues(pool)
	}
}
