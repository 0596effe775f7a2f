package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/internal/defaults"
	"pollbal/proxy/clientconn"
	"pollbal/proxy/h2"
	"pollbal/proxy/upstream"
)

// Options configure a Proxy.
type Options struct {
	Balancer   *balancer.Balancer
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// AccessLog gets one line per request (logentry.go); nil: none. Whether it is on, the
	// requests get their X-Request-Id.
	AccessLog *accesslog.Logger
}

// Proxy is the client-traffic data plane. It is safe for concurrent use and must not be copied.
// Serve may be called for several listeners; Shutdown stops all of them.
type Proxy struct {
	bal       *balancer.Balancer
	log       *slog.Logger
	upstreams *upstream.Pools
	watch     *upstream.Watchdog   // enforces proxy.backend_timeout on backend connections
	bufs      upstream.CopyBuffers // carry streamed bodies
	clock     upstream.MonoClock   // times requests
	srv       *fasthttp.Server
	alog      *accesslog.Logger // nil: off
	entries   logEntries        // the requests' access-log entries
	afterDo   func()            // tests only: runs after each backend round trip (e.g. to panic)

	// trust is proxy.trusted_proxies of the configuration requests last saw.
	trust trustCache

	open        atomic.Int64 // client connections open, on every listener (max_connections)
	connMetrics *connMetrics
	answers     *answerMetrics  // pollbal_responses_total, pollbal_client_gone_total
	requests    *requestMetrics // pollbal_requests_total, pollbal_request_duration_seconds, by app
	upgrades    upgradeSet      // upgraded (WebSocket) connections open
	h2          *h2.Server      // serves HTTP/2 connections with Handler (http2.go)

	// stopping is set by Shutdown. fasthttp's own CloseOnShutdown only holds while its Shutdown
	// waits; when ctx ends first, the handler still closes every connection it answers on.
	stopping atomic.Bool
	// clientHooks is what the listeners ask of the proxy (clientconn.Hooks).
	clientHooks clientconn.Hooks

	// handling counts the requests inside Handler, on a cache line of its own (every request
	// changes it twice). Above procs (GOMAXPROCS when the proxy was built) other goroutines are
	// very likely runnable, and a goroutine about to read bytes that have not arrived yet
	// yields first (yieldIfBusy).
	_        [64]byte
	handling atomic.Int64
	_        [56]byte
	procs    int64

	mu       sync.Mutex // guards the fields below
	stopped  bool
	serveLns []*clientconn.Listener
}

// New builds a Proxy on a balancer. The server's settings follow the bench tuning
// (bench/TUNING.md): no server-side read, write or idle deadlines (the client timeouts
// are enforced by each listener's scanner instead, see clientconn), no Server, Date or default
// Content-Type headers of its own, and the request time taken lazily.
func New(o Options) (*Proxy, error) {
	if o.Balancer == nil {
		return nil, errors.New("proxy: nil balancer")
	}
	o.Logger = defaults.Logger(o.Logger)
	o.Registerer = defaults.Registerer(o.Registerer)
	bal := o.Balancer
	p := &Proxy{
		bal:   bal,
		log:   o.Logger,
		alog:  o.AccessLog,
		clock: upstream.NewMonoClock(),
		procs: int64(runtime.GOMAXPROCS(0)),
	}
	open := func() float64 { return float64(p.open.Load()) }
	upgraded := func() float64 { return float64(p.upgrades.len()) }
	var err error
	if p.connMetrics, err = newConnMetrics(o.Registerer, open, upgraded); err != nil {
		return nil, err
	}
	m := p.connMetrics
	p.clientHooks = clientconn.Hooks{
		Admit:          p.admit,
		Release:        func() { p.open.Add(-1) },
		Limits:         p.clientLimits,
		Stopping:       p.stopping.Load,
		Now:            p.clock.Now,
		Yield:          p.yieldIfBusy,
		HeaderTimedOut: p.headerTimedOut,
		Log:            p.log,
		Metrics: &clientconn.Metrics{
			AcceptErrors: m.acceptErrors, Refused: m.refused,
			HeaderTimeouts: m.headerTimeouts, ClientTimeouts: m.clientTimeouts, IdleTimeouts: m.idleTimeouts,
			TLSHandshakeErrors: m.tlsHandshakeErrors,
		},
	}
	if p.answers, err = newAnswerMetrics(o.Registerer); err != nil {
		return nil, err
	}
	if p.requests, err = newRequestMetrics(bal, o.Registerer); err != nil {
		return nil, err
	}
	if err = p.newHTTP2(o); err != nil {
		return nil, err
	}
	p.watch = upstream.NewWatchdog(p.clock, func() time.Duration { return bal.Snapshot().Config().Proxy.BackendTimeout }, clientGone)
	p.upstreams = upstream.NewPools(bal, p.watch, &p.bufs, p.yieldIfBusy)
	p.srv = &fasthttp.Server{
		Handler:            p.Handler,
		ErrorHandler:       p.errorHandler,
		HeaderReceived:     p.headerReceived,
		ExpectHandler:      p.expectContinue,
		ConnState:          p.connState,
		Logger:             serverLog{o.Logger},
		MaxRequestBodySize: bufferLimit(&o.Balancer.Snapshot().Config().Proxy),
		// Bodies over proxy.buffer_request_body reach the handler as streams (body.go).
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		ReadBufferSize:               upstream.ReadBufferSize,
		NoDefaultServerHeader:        true,
		NoDefaultDate:                true,
		NoDefaultContentType:         true,
		LazyRequestTime:              true,
		CloseOnShutdown:              true,
	}
	// Offered only where the TLS listener's ALPN lists h2 (http2.enabled).
	p.srv.NextProto(h2.ProtoTLS, p.serveHTTP2)
	p.srv.NextProto(clientconn.ProtoH2C, p.serveH2C)
	return p, nil
}

// Serve accepts client connections on ln until Shutdown. Failed Accepts are waited out, never
// returned (see listener); it returns nil after Shutdown, and an error when serving fails
// otherwise.
func (p *Proxy) Serve(ln net.Listener) error {
	return p.serve(ln, nil)
}

// ServeTLS is Serve for a TLS listener: ln accepts TCP connections, and each is served over
// TLS with conf (HTTP/1.1), under the same connection limit and client timeouts; the handshake
// counts towards proxy.header_timeout. Requests it serves reach backends with
// X-Forwarded-Proto: https.
func (p *Proxy) ServeTLS(ln net.Listener, conf *tls.Config) error {
	if conf == nil {
		return errors.New("proxy: ServeTLS without a TLS configuration")
	}
	return p.serve(ln, conf)
}

func (p *Proxy) serve(ln net.Listener, conf *tls.Config) error {
	l := clientconn.NewListener(ln, conf, &p.clientHooks)
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	p.serveLns = append(p.serveLns, l)
	p.mu.Unlock()

	go l.ScanLoop()
	err := p.srv.Serve(l)
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if err != nil && !stopped {
		return fmt.Errorf("serve proxy on %s: %w", ln.Addr(), err)
	}
	return nil
}

// Shutdown stops accepting connections and drains the ones open: a request in flight is
// answered with "Connection: close"; a connection holding part of a request (half-sent
// headers, a TLS handshake) is closed at once; one that sent nothing since it opened or since
// its last answer is closed once it has been so for drainGrace, so that a keep-alive client's
// next request already on its way is answered rather than cut (see drainGrace). Shutdown
// returns once every connection is gone, or when ctx ends (then with ctx's error, and the
// requests still in flight finish in the background). Upgraded (WebSocket) connections get
// the same wait and are closed when ctx ends; HTTP/2 connections are sent a GOAWAY, finish
// their open streams and close, or are closed when ctx ends. Teardown order: listeners,
// client connections as they go quiet or their request ends (HTTP/2 ones as their streams
// end), upgraded connections, then idle backend connections; the scanners and the backend-timeout watchdog end by themselves once no
// connection is left.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.stopping.Store(true)
	p.mu.Lock()
	p.stopped = true
	lns := p.serveLns
	p.mu.Unlock()
	for _, l := range lns {
		_ = l.Close() // stop accepting; the scan this asks for sees stopping
	}
	p.waitServed(ctx, lns)

	// HTTP/2 connections are still the server's (served by serveHTTP2 until they end): they
	// are told to go away first, and the server's wait below ends as they do.
	h2done := make(chan error, 1)
	go func() { h2done <- p.h2.Shutdown(ctx) }()

	// Nothing else is left for the server (unless ctx ended): it stops at once. Its own way
	// closes idle connections without a grace, so it comes last.
	err := p.srv.ShutdownWithContext(ctx)
	// Upgraded connections are no longer the server's: they get the rest of ctx, then are
	// closed.
	if uerr := p.upgrades.drain(ctx); uerr != nil && err == nil {
		err = uerr
	}
	if herr := <-h2done; herr != nil && err == nil {
		err = herr
	}
	p.upstreams.CloseIdle()
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		return fmt.Errorf("shut down proxy: %w", ctxErr)
	}
	if err != nil {
		// Closing a listener that its owner had already closed: nothing left to do.
		p.log.Debug("proxy listener close", "error", err)
	}
	return nil
}

// waitServed waits until no listener has a connection the server still serves (the scanners
// close them as Shutdown says), or ctx ends. A listener counts once two of its scans have
// ended since stopping was set: the first may have begun before it.
func (p *Proxy) waitServed(ctx context.Context, lns []*clientconn.Listener) {
	marks := make([]uint64, len(lns))
	for i, l := range lns {
		marks[i] = l.Scans()
	}
	tick := time.NewTicker(clientconn.DrainTick / 5)
	defer tick.Stop()
	for {
		done := true
		for i, l := range lns {
			if !l.ScanEnded() && (l.Scans() < marks[i]+2 || l.Served() > 0) {
				done = false
				break
			}
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// connState follows a client connection through fasthttp's states, for the client timeouts.
func (p *Proxy) connState(nc net.Conn, st fasthttp.ConnState) {
	c := clientconn.Tracked(nc)
	if c == nil {
		return
	}
	switch st {
	case fasthttp.StateActive:
		c.RequestStarted()
	case fasthttp.StateIdle:
		c.RequestServed()
	case fasthttp.StateHijacked:
		c.Hijacked()
	}
}

// clientLimits reads the client timeouts of the current configuration.
func (p *Proxy) clientLimits() clientconn.Limits {
	pc := &p.bal.Snapshot().Config().Proxy
	return clientconn.Limits{Header: pc.HeaderTimeout, Client: pc.ClientTimeout, Idle: pc.IdleTimeout}
}

// admit counts a new client connection in, unless proxy.max_connections are open.
func (p *Proxy) admit() bool {
	n := p.open.Add(1)
	if limit := p.bal.Snapshot().Config().Proxy.MaxConnections; limit > 0 && n > int64(limit) {
		p.open.Add(-1)
		return false
	}
	return true
}

// headerReceived sets the buffering limit per request from the current configuration, so a
// reload can raise or lower it: fasthttp reads a body up to it before calling the handler, and
// leaves a larger one to the handler as a stream (proxy.max_request_body is then the
// handler's, body.go).
func (p *Proxy) headerReceived(*fasthttp.RequestHeader) fasthttp.RequestConfig {
	return fasthttp.RequestConfig{MaxRequestBodySize: bufferLimit(&p.bal.Snapshot().Config().Proxy)}
}

// bufferLimit is the server's body limit for pc: proxy.buffer_request_body, at least 1 (0 would
// mean fasthttp's default).
func bufferLimit(pc *configs.Proxy) int {
	return max(pc.BufferRequestBody, 1)
}

// errorHandler answers requests the server could not read (body over the limit, malformed or
// oversized headers) and counts them under the app their Host matches, if any. A TLS
// handshake that failed is no request: it was counted as such (tlsConn.handshake), and no
// answer can be written on its connection.
func (p *Proxy) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	if tc, ok := ctx.Conn().(*clientconn.TLSConn); ok && !tc.Handshaken() {
		return
	}
	snap := p.bal.Snapshot()
	e := p.beginEntry(ctx, snap.Config(), p.clock.Now())
	code := answerServerError(ctx, err, snap.Config().Proxy.MaxRequestBody)
	app := snap.Route(ctx.Host())
	e.routed(app)
	p.requests.of(snap, app).Count(code)
	p.answers.count(code, &ctx.Response.Header)
	p.finish(ctx, e, 0, true, false)
}

// serverLog routes fasthttp's own messages (mostly clients that went away mid-request) to the
// debug level.
type serverLog struct{ l *slog.Logger }

func (s serverLog) Printf(format string, args ...any) {
	s.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
}
