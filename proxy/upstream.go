package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
)

// Client settings for backends.
const (
	maxResponseBody = 64 << 20 // a response larger than this is answered 502 bad_response
	readBufferSize  = 8 << 10  // bounds a response's (and a request's) header block
	// idleConnDuration closes kept-alive backend connections idle this long, below the idle
	// timeouts of common backend servers (Node.js and Apache: 5 s), so pollbal does not send a
	// request on a connection the backend has already closed. (A backend that closes idle
	// connections sooner still can: such a failure cannot be told from a backend that crashed
	// after receiving the request, so only the proxy's own retry on another candidate applies.)
	idleConnDuration = 2 * time.Second
)

// upstream is the HostClient of one backend. Its MaxConns is the backend's capacity, which the
// leases already enforce, so a request never waits for a connection. It is safe for concurrent
// use and must not be copied.
type upstream struct {
	hc       *fasthttp.HostClient
	capacity int
	// checked is the configuration the capacity was last verified against: a reload installs
	// a new *configs.Config, and the first request that sees it re-checks the capacity.
	checked atomic.Pointer[configs.Config]
}

func newUpstream(addr string, capacity int, w *watchdog) *upstream {
	return &upstream{
		capacity: capacity,
		hc: &fasthttp.HostClient{
			Addr:                          addr,
			MaxConns:                      capacity,
			MaxIdemponentCallAttempts:     1, // retries are the proxy's, on another candidate
			MaxIdleConnDuration:           idleConnDuration,
			MaxResponseBodySize:           maxResponseBody,
			ReadBufferSize:                readBufferSize,
			NoDefaultUserAgentHeader:      true,
			DisablePathNormalizing:        true,
			DisableHeaderNamesNormalizing: true,
			DialTimeout:                   w.dial, // enforces proxy.backend_timeout; see watchdog
		},
	}
}

// upstreams maps runtime backends to their clients: a copy-on-write map behind an atomic
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

// get returns the client for b as configured in snap. The common case is one map read and one
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
		// Its in-flight requests finish on it; its idle connections are of no further use.
		prev.hc.CloseIdleConnections()
	}
	next[b] = up
	u.m.Store(&next)
	return up
}

// reload drops the clients of backends that are no longer in snap, and of those whose capacity
// changed (they are rebuilt on next use). Requests in flight on a dropped client finish on it.
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
		up.hc.CloseIdleConnections()
	}
	u.m.Store(&next)
}

// closeIdle closes every idle backend connection (after shutdown).
func (u *upstreams) closeIdle() {
	for _, up := range *u.m.Load() {
		up.hc.CloseIdleConnections()
	}
}

// len is the number of clients held (for tests).
func (u *upstreams) len() int { return len(*u.m.Load()) }
