package upstream

import (
	"sync"
	"sync/atomic"
	"time"

	"pollbal/balancer"
	"pollbal/configs"
)

// Connection settings for backends.
const (
	ReadBufferSize  = 8 << 10 // bounds a response's (and a request's) header block
	writeBufferSize = 8 << 10 // request headers and small bodies go out in one write
	// idleConnDuration closes kept-alive backend connections idle this long, below the idle
	// timeouts of common backend servers (Node.js and Apache: 5 s), so pollbal does not send a
	// request on a connection the backend has already closed. (A backend that closes idle
	// connections sooner still can: such a failure cannot be told from a backend that crashed
	// after receiving the request, so only the proxy's own retry on another candidate applies.)
	idleConnDuration = 2 * time.Second
)

// Pools holds the connection pool of every backend of the balancer's current
// configuration. It is derived from the balancer alone: the table is rebuilt from the
// balancer's current snapshot (never from a request's own, which may be older) when a request
// finds it was built for another configuration, so nothing has to be called after a reload and
// no order of calls matters. A pool belongs to a runtime backend (its id and address), whatever
// the backend's capacity: the leases bound the connections in use, so a pool never makes a
// request wait, and a capacity change keeps the idle connections. It is safe for concurrent use.
type Pools struct {
	bal    *balancer.Balancer
	watch  *Watchdog  // watches every pool's connections
	shared shared     // by every pool
	mu     sync.Mutex // serialises rebuilds
	t      atomic.Pointer[upstreamTable]
}

// upstreamTable is the pools of one configuration's backends. It is immutable once published.
type upstreamTable struct {
	cfg   *configs.Config // nil before the first request
	pools map[*balancer.Backend]*ConnPool
}

// NewPools returns the pools of bal's backends, whose connections w watches. Streamed bodies
// go through bufs; yield, when set, is called before the first read of an answer (RoundTrip).
func NewPools(bal *balancer.Balancer, w *Watchdog, bufs *CopyBuffers, yield func()) *Pools {
	u := &Pools{bal: bal, watch: w, shared: shared{bufs: bufs, yield: yield}}
	u.t.Store(&upstreamTable{})
	return u
}

// Get returns the connection pool of b, a backend leased from snap. The common case is one
// pointer compare and one map read.
func (u *Pools) Get(snap *balancer.Snapshot, b *balancer.Backend) *ConnPool {
	if t := u.t.Load(); t.cfg == snap.Config() {
		if p := t.pools[b]; p != nil {
			return p
		}
	}
	return u.slow(b)
}

// slow serves a request whose snapshot is not the table's: one older than the balancer's (b's
// pool is the current one, or b has been removed since), or newer than the table (the table is
// rebuilt first).
func (u *Pools) slow(b *balancer.Backend) *ConnPool {
	t := u.t.Load()
	if t.cfg != u.bal.Snapshot().Config() {
		t = u.rebuild()
	}
	if p := t.pools[b]; p != nil {
		return p
	}
	// b left the configuration while this request held an older snapshot: its connection is
	// not kept for anyone.
	p := newConnPool(b.Address, u.watch, &u.shared)
	p.closed = true
	return p
}

// rebuild publishes the table of the balancer's current configuration: backends that stay keep
// their pools, new ones get empty pools, and the pools of backends that left are retired (their
// idle connections are closed now, those in use when their request ends).
func (u *Pools) rebuild() *upstreamTable {
	u.mu.Lock()
	defer u.mu.Unlock()
	snap := u.bal.Snapshot() // read under mu: tables only move forward
	old := u.t.Load()
	if old.cfg == snap.Config() {
		return old
	}
	backends := snap.Backends()
	next := &upstreamTable{cfg: snap.Config(), pools: make(map[*balancer.Backend]*ConnPool, len(backends))}
	for _, b := range backends {
		if p := old.pools[b]; p != nil {
			next.pools[b] = p
			continue
		}
		next.pools[b] = newConnPool(b.Address, u.watch, &u.shared)
	}
	for b, p := range old.pools {
		if next.pools[b] == nil {
			p.closeIdle(true)
		}
	}
	u.t.Store(next)
	return next
}

// Built reports the configuration the current table was built for, and how many pools it
// holds (for tests).
func (u *Pools) Built() (cfg *configs.Config, pools int) {
	t := u.t.Load()
	return t.cfg, len(t.pools)
}

// CloseIdle closes every idle backend connection (after shutdown).
func (u *Pools) CloseIdle() {
	for _, p := range u.t.Load().pools {
		p.closeIdle(true)
	}
}
