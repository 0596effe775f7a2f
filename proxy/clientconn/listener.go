package clientconn

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/latch"
	"pollbal/proxy/indexed"
)

// Accept back-off after a failed Accept (out of descriptors, of buffers…): doubled from
// minAcceptBackoff on each failure in a row, up to maxAcceptBackoff. The cap bounds how long
// pollbal takes to serve again once descriptors are free.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = 200 * time.Millisecond
)

// acceptLogEvery rate-limits the log line about failing Accepts.
const acceptLogEvery = time.Second

// nextAcceptBackoff is the wait after a failed Accept that followed a wait of prev (0 after a
// success).
func nextAcceptBackoff(prev time.Duration) time.Duration {
	if prev < minAcceptBackoff {
		return minAcceptBackoff
	}
	return min(2*prev, maxAcceptBackoff)
}

// Listener is a client listener of the proxy: Accept errors never stop serving (they are
// counted, logged at most once a second and waited out with a back-off), connections past
// proxy.max_connections are closed at once, and every accepted connection is a Conn
// that the listener's one scanner goroutine times. It is safe for concurrent use and must not
// be copied.
type Listener struct {
	net.Listener
	hooks *Hooks
	tls   *tls.Config // nil: plain HTTP

	closed    *latch.Latch // set by Close
	closeOnce sync.Once
	kick      chan struct{} // asks the scanner for a scan now (Shutdown)
	scans     atomic.Uint64 // scans done (tests and Shutdown wait on it)
	// served is how many connections fasthttp served (not hijacked) after the last scan's
	// closes; scanEnded is set once the scanner has returned (no connection left).
	served    atomic.Int64
	scanEnded atomic.Bool

	// The accepting goroutine's own.
	lastLog time.Time
	failed  int // Accepts failed since the last log line

	mu    sync.Mutex // guards conns and every Conn's rec and idx
	conns []*Conn
}

// Hooks is what a listener and its connections ask of the server they serve. Every field
// must be set; the functions are called from the accepting, scanning and serving goroutines.
type Hooks struct {
	Admit    func() bool          // takes a place under proxy.max_connections; false: refuse
	Release  func()               // gives an admitted connection's place back, once
	Limits   func() Limits        // the client timeouts of the current configuration
	Stopping func() bool          // the server shuts down: connections without a request go
	Now      func() time.Duration // the server's monotonic clock
	Yield    func()               // called before the first read after an answer
	// HeaderTimedOut answers a request whose headers began at since and did not end within
	// proxy.header_timeout (408; over TLS, once the handshake is over). The connection is
	// closed after it returns.
	HeaderTimedOut func(c *Conn, since time.Duration)
	Log            *slog.Logger
	Metrics        *Metrics
	// H2C is http2.h2c: a plain connection that opens with the HTTP/2 preface is handed over
	// (PrefaceConn). It needs a restart to change.
	H2C bool
}

// Metrics are the counters a listener and its connections count into.
type Metrics struct {
	AcceptErrors, Refused                        prometheus.Counter
	HeaderTimeouts, ClientTimeouts, IdleTimeouts prometheus.Counter
	TLSHandshakeErrors                           prometheus.Counter
}

// NewListener serves the connections ln accepts, over TLS when conf is set (nil: plain HTTP).
// Its scanner (ScanLoop) must run for its client timeouts and shutdown to apply.
func NewListener(ln net.Listener, conf *tls.Config, h *Hooks) *Listener {
	return &Listener{Listener: ln, hooks: h, tls: conf, closed: latch.New(), kick: make(chan struct{}, 1)}
}

// Scans reports how many scans the scanner has done.
func (l *Listener) Scans() uint64 { return l.scans.Load() }

// Served reports how many connections fasthttp served (not hijacked) after the last scan's
// closes.
func (l *Listener) Served() int64 { return l.served.Load() }

// ScanEnded reports whether the scanner has returned: no connection is left.
func (l *Listener) ScanEnded() bool { return l.scanEnded.Load() }

// Accept returns the next client connection. It returns an error only once the listener is
// closed.
func (l *Listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if l.closed.IsSet() || errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			l.hooks.Metrics.AcceptErrors.Inc()
			backoff = nextAcceptBackoff(backoff)
			l.logAcceptError(err, backoff)
			if !l.wait(backoff) {
				return nil, net.ErrClosed
			}
			continue
		}
		backoff = 0
		if !l.hooks.Admit() {
			_ = c.Close()
			l.hooks.Metrics.Refused.Inc()
			continue
		}
		cc := l.track(c)
		if cc == nil {
			_ = c.Close()
			l.hooks.Release()
			return nil, net.ErrClosed
		}
		if cc.secure != nil {
			return &TLSConn{Conn: cc.secure, cc: cc}, nil
		}
		if l.hooks.H2C {
			return &PrefaceConn{Conn: cc}, nil
		}
		return cc, nil
	}
}

func (l *Listener) logAcceptError(err error, backoff time.Duration) {
	l.failed++
	now := time.Now()
	if now.Sub(l.lastLog) < acceptLogEvery {
		return
	}
	l.hooks.Log.Warn("accepting client connections failed; still serving, retrying", "error", err,
		"failures", l.failed, "backoff", backoff)
	l.lastLog, l.failed = now, 0
}

// wait waits d, or until the listener is closed (then it reports false).
func (l *Listener) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.closed.Done():
		return false
	}
}

// Close stops accepting; the scanner goes on until the last connection is gone.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.closed.Set()
		err = l.Listener.Close()
		l.Wake()
	})
	return err
}

// Wake asks the scanner for a scan now.
func (l *Listener) Wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// track wraps an accepted connection and adds it to the scanned set. It returns nil when the
// listener was closed meanwhile: the scanner may have ended.
func (l *Listener) track(nc net.Conn) *Conn {
	c := &Conn{Conn: nc, l: l, client: NewIP(nc.RemoteAddr())}
	if l.tls != nil {
		// Before the scanner can see c: it reads secure to answer a header timeout.
		c.secure = tls.Server(c, l.tls)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.IsSet() {
		return nil
	}
	c.rec = record{since: l.hooks.Now()}
	l.conns = indexed.Append(l.conns, c)
	return c
}

// forget removes c from the scanned set and the open count; it runs once per connection.
func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	l.conns = indexed.Remove(l.conns, c)
	l.mu.Unlock()
	l.hooks.Release()
}

// limits reads the client timeouts of the current configuration.
func (l *Listener) limits() Limits { return l.hooks.Limits() }
