package admin

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/metric"
)

// ioTimeout bounds reading one request (headers and body) and writing one answer on an admin
// connection.
const ioTimeout = 30 * time.Second

// refusedLogEvery rate-limits the log line about admin connections closed at the cap.
const refusedLogEvery = 10 * time.Second

// Limits bound the admin listener's connections, so that connections nobody uses cannot take
// the descriptors that client traffic needs. A reload replaces them (Server.Prepare and Apply):
// the cap applies to the next connection accepted, a timeout from a connection's next state
// change on. A zero field means no limit.
type Limits struct {
	// MaxConnections is how many admin connections may be open at once; one more is closed
	// as soon as it is accepted.
	MaxConnections int
	// HeaderTimeout bounds the wait for a new connection's first request head.
	HeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that starts no request for this long.
	IdleTimeout time.Duration
}

// timeoutFor is how long a connection may stay in state before it is closed; 0 means no
// timer: an active request is bounded by ioTimeout (the http.Server's read and write
// deadlines), and a closed connection needs none.
func timeoutFor(state http.ConnState, l Limits) time.Duration {
	switch state {
	case http.StateNew:
		return l.HeaderTimeout
	case http.StateIdle:
		// Until the next request head is complete: a request started and never finished on a
		// kept-alive connection is as idle as none.
		return l.IdleTimeout
	default:
		return 0
	}
}

// conns counts and times the admin connections. It is safe for concurrent use.
type conns struct {
	limits  func() Limits // the current limits
	log     *slog.Logger
	open    atomic.Int64
	refused prometheus.Counter

	mu       sync.Mutex // guards the refusal log's state
	lastLog  time.Time
	unlogged int // refusals since the last log line
}

func newConns(limits func() Limits, log *slog.Logger, reg prometheus.Registerer) (*conns, error) {
	c := &conns{limits: limits, log: log, refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pollbal_admin_connections_refused_total",
		Help: "Admin connections closed at once because admin.max_connections were open.",
	})}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pollbal_admin_connections",
		Help: "Admin connections open now.",
	}, func() float64 { return float64(c.open.Load()) })
	if err := metric.Register(reg, c.refused, open); err != nil {
		return nil, err
	}
	return c, nil
}

// admit takes a place for a new connection, or reports false when max are open (0: no cap).
func (c *conns) admit(max int) bool {
	for {
		n := c.open.Load()
		if max > 0 && n >= int64(max) {
			return false
		}
		if c.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// refuse counts a connection closed at the cap and logs it, at most once per refusedLogEvery.
func (c *conns) refuse(max int) {
	c.refused.Inc()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unlogged++
	now := time.Now()
	if now.Sub(c.lastLog) < refusedLogEvery {
		return
	}
	c.log.Warn("admin connections at admin.max_connections; closing new ones at once",
		"max_connections", max, "refused", c.unlogged)
	c.lastLog, c.unlogged = now, 0
}

// track is the http.Server's ConnState hook: it (re)starts the connection's timer for its new
// state.
func (c *conns) track(nc net.Conn, state http.ConnState) {
	// Every connection the server sees comes from limitListener.Accept.
	if ac, ok := nc.(*adminConn); ok {
		ac.arm(timeoutFor(state, c.limits()))
	}
}

// limitListener is the admin listener: a connection past the cap is closed as soon as it is
// accepted, and every other one is an adminConn. It is safe for concurrent use.
type limitListener struct {
	net.Listener
	c *conns
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		max := l.c.limits().MaxConnections
		if !l.c.admit(max) {
			l.c.refuse(max) // first: whoever sees the close sees it counted
			_ = nc.Close()
			continue
		}
		return &adminConn{Conn: nc, c: l.c}, nil
	}
}

// adminConn is an admin connection: it holds its place under the cap until it is closed, and is
// closed by its timer when it stays too long in one state. It is safe for concurrent use.
type adminConn struct {
	net.Conn
	c         *conns
	closeOnce sync.Once

	mu    sync.Mutex
	timer *time.Timer
	gen   uint64 // bumped by every arm: a timer that fires for an older state does nothing
}

// arm replaces the connection's timer by one that closes it after d (none when d is 0).
func (a *adminConn) arm(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	if d <= 0 {
		return
	}
	gen := a.gen
	a.timer = time.AfterFunc(d, func() { a.expire(gen) })
}

// expire closes the connection unless its state changed since the timer of gen was armed.
func (a *adminConn) expire(gen uint64) {
	a.mu.Lock()
	current := gen == a.gen
	a.mu.Unlock()
	if current {
		_ = a.Close()
	}
}

// Close closes the connection and gives its place back, once.
func (a *adminConn) Close() error {
	err := a.Conn.Close()
	a.closeOnce.Do(func() {
		a.arm(0)
		a.c.open.Add(-1)
	})
	return err
}
