package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"pollbal/internal/latch"
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

// listener is a client listener of the proxy: Accept errors never stop serving (they are
// counted, logged at most once a second and waited out with a back-off), connections past
// proxy.max_connections are closed at once, and every accepted connection is a clientConn
// that the listener's one scanner goroutine times. It is safe for concurrent use and must not
// be copied.
type listener struct {
	net.Listener
	p   *Proxy
	tls *tls.Config // nil: plain HTTP

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

	mu    sync.Mutex // guards conns and every clientConn's rec and idx
	conns []*clientConn
}

func newListener(ln net.Listener, p *Proxy) *listener {
	return &listener{Listener: ln, p: p, closed: latch.New(), kick: make(chan struct{}, 1)}
}

// Accept returns the next client connection. It returns an error only once the listener is
// closed.
func (l *listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if l.closed.IsSet() || errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			l.p.connMetrics.acceptErrors.Inc()
			backoff = nextAcceptBackoff(backoff)
			l.logAcceptError(err, backoff)
			if !l.wait(backoff) {
				return nil, net.ErrClosed
			}
			continue
		}
		backoff = 0
		if !l.p.admit() {
			_ = c.Close()
			l.p.connMetrics.refused.Inc()
			continue
		}
		cc := l.track(c)
		if cc == nil {
			_ = c.Close()
			l.p.open.Add(-1)
			return nil, net.ErrClosed
		}
		if cc.secure != nil {
			return &tlsConn{Conn: cc.secure, cc: cc}, nil
		}
		if l.p.h2c {
			return &prefaceConn{clientConn: cc}, nil
		}
		return cc, nil
	}
}

func (l *listener) logAcceptError(err error, backoff time.Duration) {
	l.failed++
	now := time.Now()
	if now.Sub(l.lastLog) < acceptLogEvery {
		return
	}
	l.p.log.Warn("accepting client connections failed; still serving, retrying", "error", err,
		"failures", l.failed, "backoff", backoff)
	l.lastLog, l.failed = now, 0
}

// wait waits d, or until the listener is closed (then it reports false).
func (l *listener) wait(d time.Duration) bool {
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
func (l *listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.closed.Set()
		err = l.Listener.Close()
		l.wake()
	})
	return err
}

// wake asks the scanner for a scan now.
func (l *listener) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// track wraps an accepted connection and adds it to the scanned set. It returns nil when the
// listener was closed meanwhile: the scanner may have ended.
func (l *listener) track(nc net.Conn) *clientConn {
	c := &clientConn{Conn: nc, l: l, client: newClientIP(nc.RemoteAddr())}
	if l.tls != nil {
		// Before the scanner can see c: it reads secure to answer a header timeout.
		c.secure = tls.Server(c, l.tls)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.IsSet() {
		return nil
	}
	c.rec = record{since: l.p.clock.now()}
	l.conns = appendIndexed(l.conns, c)
	return c
}

// forget removes c from the scanned set and the open count; it runs once per connection.
func (l *listener) forget(c *clientConn) {
	l.mu.Lock()
	l.conns = removeIndexed(l.conns, c)
	l.mu.Unlock()
	l.p.open.Add(-1)
}

// limits reads the client timeouts of the current configuration.
func (l *listener) limits() clientLimits {
	pc := &l.p.bal.Snapshot().Config().Proxy
	return clientLimits{header: pc.HeaderTimeout, client: pc.ClientTimeout, idle: pc.IdleTimeout}
}
