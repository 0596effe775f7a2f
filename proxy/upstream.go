package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"pollbal/balancer"
	"pollbal/configs"
)

// Connection settings for backends.
const (
	readBufferSize  = 8 << 10 // bounds a response's (and a request's) header block
	writeBufferSize = 8 << 10 // request headers and small bodies go out in one write
	// idleConnDuration closes kept-alive backend connections idle this long, below the idle
	// timeouts of common backend servers (Node.js and Apache: 5 s), so pollbal does not send a
	// request on a connection the backend has already closed. (A backend that closes idle
	// connections sooner still can: such a failure cannot be told from a backend that crashed
	// after receiving the request, so only the proxy's own retry on another candidate applies.)
	idleConnDuration = 2 * time.Second
)

// upstream is the connection pool of one backend, with the capacity it was built for. The
// leases bound the connections in use to the capacity, so a request never waits for one. It
// is safe for concurrent use and must not be copied.
type upstream struct {
	pool     *connPool
	capacity int
	// checked is the configuration the capacity was last verified against: a reload installs
	// a new *configs.Config, and the first request that sees it re-checks the capacity.
	checked atomic.Pointer[configs.Config]
}

func newUpstream(addr string, capacity int, w *watchdog) *upstream {
	return &upstream{capacity: capacity, pool: newConnPool(addr, w)}
}

// upstreams maps runtime backends to their upstreams: a copy-on-write map behind an atomic
// pointer, so the request path reads it without locking. It is safe for concurrent use.
type upstreams struct {
	watch *watchdog  // watches every client's connections
	mu    sync.Mutex // serialises writers
	m     atomic.Pointer[map[*balancer.Backend]*upstream]
}

func newUpstreams(w *watchdog) *upstreams {
	u := &upstreams{watch: w}
	u.m.Store(&map[*balancer.Backend]*upstream{})
	return u
}

// get returns the upstream for b as configured in snap. The common case is one map read and one
// pointer compare; a backend seen for the first time, or for the first time since a reload,
// takes the slow path.
func (u *upstreams) get(snap *balancer.Snapshot, b *balancer.Backend) *upstream {
	if up := (*u.m.Load())[b]; up != nil && up.checked.Load() == snap.Config() {
		return up
	}
	return u.slow(snap, b)
}

func (u *upstreams) slow(snap *balancer.Snapshot, b *balancer.Backend) *upstream {
	capacity := snap.Capacity(b)
	if capacity < 1 {
		capacity = 1 // not in snap: cannot happen for a leased backend, but never build MaxConns 0 (unlimited)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	old := *u.m.Load()
	if up := old[b]; up != nil && up.capacity == capacity {
		up.checked.Store(snap.Config())
		return up
	}
	up := newUpstream(b.Address, capacity, u.watch)
	up.checked.Store(snap.Config())
	next := make(map[*balancer.Backend]*upstream, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	if prev := old[b]; prev != nil {
		// Its in-flight requests finish on it; its connections are of no further use.
		prev.pool.closeIdle(true)
	}
	next[b] = up
	u.m.Store(&next)
	return up
}

// reload drops the upstreams of backends that are no longer in snap, and of those whose capacity
// changed (they are rebuilt on next use). Requests in flight on a dropped one finish on it.
func (u *upstreams) reload(snap *balancer.Snapshot) {
	live := map[*balancer.Backend]bool{}
	for _, b := range snap.Backends() {
		live[b] = true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	old := *u.m.Load()
	next := make(map[*balancer.Backend]*upstream, len(old))
	for b, up := range old {
		if live[b] && up.capacity == snap.Capacity(b) {
			up.checked.Store(snap.Config())
			next[b] = up
			continue
		}
		up.pool.closeIdle(true)
	}
	u.m.Store(&next)
}

// closeIdle closes every idle backend connection (after shutdown).
func (u *upstreams) closeIdle() {
	for _, up := range *u.m.Load() {
		up.pool.closeIdle(true)
	}
}

// len is the number of upstreams held (for tests).
func (u *upstreams) len() int { return len(*u.m.Load()) }
