package proxy

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/proxy/clientconn"
	"pollbal/proxy/upstream"
)

// Header names of an upgrade.
const (
	headerConnection = "Connection"
	headerUpgrade    = "Upgrade"
)

// reasonUpgradeUnsupported is the reason of the 501 for an upgrade pollbal does not forward.
const reasonUpgradeUnsupported = "upgrade_unsupported"

// upgradeBufferSize is the buffer of each direction of an upgraded connection: an idle
// WebSocket holds two while it waits, so they are smaller than a streamed body's.
const upgradeBufferSize = 16 << 10

// upgradePlan is what a request asks of an upgrade.
type upgradePlan uint8

const (
	upgradeNone      upgradePlan = iota // no upgrade: forwarded as plain HTTP (an Upgrade header is dropped)
	upgradeWebSocket                    // a WebSocket handshake: forwarded as an upgrade
	upgradeRefused                      // another protocol, or not a valid handshake: 501 upgrade_unsupported
)

// planUpgrade decides what a request asks of an upgrade from its protocol version, method,
// the values of its Connection and Upgrade headers (every line, comma-joined) and whether it
// has a body. A request asks for one when Connection names "upgrade" and Upgrade names a
// protocol (an HTTP/1.0 request never does: RFC 9110 §7.8 has servers ignore it). Only a
// WebSocket handshake is forwarded: Upgrade is "websocket" alone (any case), the method GET
// and there is no body (RFC 6455 §4.1). Anything else that asks for an upgrade (h2c, several
// protocols to choose from, a WebSocket handshake with a body) is refused: a backend could
// switch to a protocol pollbal does not pass on.
func planUpgrade(http11 bool, method, connection, upgrade []byte, hasBody bool) upgradePlan {
	if !http11 || !hasToken(connection, "upgrade") {
		return upgradeNone
	}
	var protocols int
	websocket := true
	for v := upgrade; len(v) > 0; {
		var tok []byte
		tok, v = nextToken(v)
		if len(tok) == 0 {
			continue
		}
		protocols++
		if !equalFold(tok, "websocket") {
			websocket = false
		}
	}
	switch {
	case protocols == 0:
		return upgradeNone
	case protocols == 1 && websocket && equalFold(method, fasthttp.MethodGet) && !hasBody:
		return upgradeWebSocket
	}
	return upgradeRefused
}

// hasToken reports whether the comma-separated list v holds tok, ignoring ASCII case.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		t, v = nextToken(v)
		if equalFold(t, tok) {
			return true
		}
	}
	return false
}

// requestUpgrade is planUpgrade for a request header whose Connection values are connection.
// prepareRequest calls it only when the request has an Upgrade header.
func requestUpgrade(h *fasthttp.RequestHeader, connection []byte) upgradePlan {
	var upgrade joined
	for k, v := range h.All() {
		if hopHeader(k) == hopUpgrade {
			upgrade.add(v, ",")
		}
	}
	cl := h.ContentLength() // -1: chunked; -2: no framing header, so no body on a request
	return planUpgrade(h.IsHTTP11(), h.Method(), connection, upgrade.bytes(), cl > 0 || cl == -1)
}

// answerUpgradeUnsupported is the 501 for an upgrade pollbal does not forward.
func answerUpgradeUnsupported(ctx *fasthttp.RequestCtx) {
	r := answer(ctx, fasthttp.StatusNotImplemented, reasonUpgradeUnsupported)
	r.AppendBodyString("upgrade not supported: pollbal forwards WebSocket upgrades only\n")
}

// startUpgrade takes over a forward whose backend answered 101 to a WebSocket upgrade: the
// backend connection (already out of the watchdog's care, RoundTrip) and the lease now belong
// to an upgradeSession, which fasthttp runs once the handler returns (ctx.Hijack, with no
// response of its own: the session writes the backend's 101). The client connection leaves the
// client timeouts for the session's own upgrade_idle_timeout. The request's log entry e goes to
// the session too, which finishes it when it ends: the caller must not touch e once
// startUpgrade has been called.
func (p *Proxy) startUpgrade(ctx *fasthttp.RequestCtx, bc *upstream.BackendConn, lease balancer.Lease, e *logEntry) {
	h := &ctx.Response.Header
	protocol := append([]byte(nil), h.Peek(headerUpgrade)...)
	stripResponseHeaders(h)
	h.Set(headerConnection, "Upgrade")
	h.SetBytesV(headerUpgrade, protocol)
	h.Set(headerBackend, lease.Backend.ID)
	h.Set(headerPool, lease.Pool)
	setResponseID(h, e.rec.RequestID)
	e.recordAnswer(ctx)

	s := &upgradeSession{
		p:     p,
		bc:    bc,
		lease: lease,
		entry: e,
		head:  h.AppendBytes(nil),
		idle:  p.bal.Snapshot().Config().Proxy.UpgradeIdleTimeout,
	}
	if c := clientconn.Tracked(ctx.Conn()); c != nil {
		s.cc = c
		c.Hijacked()
		c.SetHandoff(s)
	}
	p.upgrades.add(s)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(s.serve)
}

// upgradeSession is one upgraded connection: after the backend's 101 is passed on, bytes are
// copied both ways until either side closes, or no byte has moved for idle. It holds the lease
// (the connection counts towards the backend's capacity) until it ends. It is safe for
// concurrent use and must not be copied.
type upgradeSession struct {
	p     *Proxy
	bc    *upstream.BackendConn
	lease balancer.Lease
	head  []byte           // the backend's 101, as passed on
	idle  time.Duration    // proxy.upgrade_idle_timeout; 0: none
	cc    *clientconn.Conn // the client connection (under TLS, if any), when it is one of pollbal's listeners'
	// entry is the request's access-log entry, finished by end (nil: none); in and out count
	// the bytes copied from the client and to it, written by serve before end runs.
	entry   *logEntry
	in, out int64

	claimed atomic.Bool  // serve or abandon has begun: only the first one runs
	last    atomic.Int64 // when a byte last moved, on p.clock

	mu     sync.Mutex // guards the fields below
	client net.Conn   // the client connection, once serve has it
	timer  *time.Timer
	closed bool
}

// serve is fasthttp's hijack handler: it writes the 101, then copies both ways. fasthttp closes
// the client connection when it returns.
func (s *upgradeSession) serve(client net.Conn) {
	if !s.claimed.CompareAndSwap(false, true) {
		return
	}
	if s.cc != nil {
		s.cc.ClearHandoff(s)
	}
	defer s.end()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.client = client
	s.touch()
	if s.idle > 0 { // a validated configuration always has one
		s.timer = time.AfterFunc(s.idle, s.checkIdle)
	}
	s.mu.Unlock()

	if _, err := client.Write(s.head); err != nil {
		return
	}
	s.head = nil
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, upgradeBufferSize)
		s.in, _, _ = upstream.CopyBody(s.bc, client, buf, s.touch)
		s.close()
	}()
	buf := make([]byte, upgradeBufferSize)
	s.out, _, _ = upstream.CopyBody(client, s.bc, buf, s.touch)
	s.close()
	<-done
}

// Abandon ends a session whose client connection closed before fasthttp handed it over.
func (s *upgradeSession) Abandon() {
	if s.claimed.CompareAndSwap(false, true) {
		s.end()
	}
}

// touch records traffic.
func (s *upgradeSession) touch() { s.last.Store(int64(s.p.clock.Now())) }

// checkIdle runs when the idle timer fires: it closes a session without traffic for idle, and
// otherwise sets the timer for the time left.
func (s *upgradeSession) checkIdle() {
	quiet := s.p.clock.Now() - time.Duration(s.last.Load())
	if quiet >= s.idle {
		s.p.connMetrics.upgradeIdleTimeouts.Inc()
		s.close()
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.timer.Reset(s.idle - quiet)
	}
	s.mu.Unlock()
}

// close closes both connections; the copies then end. It may be called more than once, by
// any goroutine.
func (s *upgradeSession) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	client, timer := s.client, s.timer
	s.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	s.bc.Close()
	switch {
	case s.cc != nil:
		_ = s.cc.Close()
	case client != nil:
		_ = rawConn(client).Close()
	}
}

// end closes the session, releases its lease and finishes its log entry; it runs once.
func (s *upgradeSession) end() {
	s.close()
	s.lease.Release()
	s.p.upgrades.remove(s)
	if s.entry != nil {
		s.p.finishTransfer(s.entry, s.p.clock.Now(), s.in, s.out, upstream.TransferUpgradeClosed)
		s.entry = nil
	}
}

// rawConn is the connection under fasthttp's hijacked one, whose own Close does nothing.
func rawConn(c net.Conn) net.Conn {
	if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
		return u.UnsafeConn()
	}
	return c
}

// upgradeSet holds the open upgraded connections, for shutdown. It is safe for concurrent use
// and must not be copied.
type upgradeSet struct {
	mu      sync.Mutex
	open    map[*upgradeSession]struct{}
	changed chan struct{} // closed and replaced when a session ends
	closing bool          // shutdown closed them all: a new one is closed at once
}

func (u *upgradeSet) add(s *upgradeSession) {
	u.mu.Lock()
	if u.open == nil {
		u.open = map[*upgradeSession]struct{}{}
	}
	u.open[s] = struct{}{}
	closing := u.closing
	u.mu.Unlock()
	if closing {
		s.close()
	}
}

func (u *upgradeSet) remove(s *upgradeSession) {
	u.mu.Lock()
	delete(u.open, s)
	if u.changed != nil {
		close(u.changed)
		u.changed = nil
	}
	u.mu.Unlock()
}

// len is the number of open upgraded connections.
func (u *upgradeSet) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.open)
}

// drain waits until every upgraded connection has ended or ctx ends. When ctx ends first it
// closes those left, and every later one, waits for them to end (which closing makes quick)
// and returns ctx's error.
func (u *upgradeSet) drain(ctx context.Context) error {
	for {
		u.mu.Lock()
		if len(u.open) == 0 {
			u.mu.Unlock()
			return nil
		}
		if u.changed == nil {
			u.changed = make(chan struct{})
		}
		changed := u.changed
		u.mu.Unlock()
		select {
		case <-changed:
			continue
		case <-ctx.Done():
		}
		break
	}
	u.mu.Lock()
	u.closing = true
	left := make([]*upgradeSession, 0, len(u.open))
	for s := range u.open {
		left = append(left, s)
	}
	u.mu.Unlock()
	for _, s := range left {
		s.close()
	}
	for {
		u.mu.Lock()
		if len(u.open) == 0 {
			u.mu.Unlock()
			return ctx.Err()
		}
		if u.changed == nil {
			u.changed = make(chan struct{})
		}
		changed := u.changed
		u.mu.Unlock()
		<-changed
	}
}
