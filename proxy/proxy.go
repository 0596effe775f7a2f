package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"pollbal/balancer"
)

// Options configure a Proxy.
type Options struct {
	Balancer   *balancer.Balancer
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Proxy is the client-traffic data plane. It is safe for concurrent use and must not be copied.
// Serve may be called for several listeners; Shutdown stops all of them.
type Proxy struct {
	bal       *balancer.Balancer
	log       *slog.Logger
	metrics   *metrics
	upstreams *upstreams
	watch     *watchdog // enforces proxy.backend_timeout on backend connections
	clock     monoClock // times requests
	srv       *fasthttp.Server
	afterDo   func() // tests only: runs after each backend round trip (e.g. to panic)

	// trust is proxy.trusted_proxies of the configuration requests last saw.
	trust trustCache

	// stopping is set by Shutdown. fasthttp's own CloseOnShutdown only holds while its Shutdown
	// waits; when ctx ends first, the handler still closes every connection it answers on.
	stopping atomic.Bool

	mu       sync.Mutex // guards the fields below
	stopped  bool
	serveLns []net.Listener
}

// New builds a Proxy on a balancer. The server's settings follow the bench tuning
// (shared/bench/TUNING.md): no server-side read, write or idle deadlines, no Server, Date or
// default Content-Type headers of its own, and the request time taken lazily.
func New(o Options) (*Proxy, error) {
	if o.Balancer == nil {
		return nil, errors.New("proxy: nil balancer")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	bal := o.Balancer
	p := &Proxy{
		bal:     bal,
		log:     o.Logger,
		metrics: m,
		clock:   newMonoClock(),
	}
	p.watch = newWatchdog(p.clock, func() time.Duration { return bal.Snapshot().Config().Proxy.BackendTimeout })
	p.upstreams = newUpstreams(p.watch)
	p.srv = &fasthttp.Server{
		Handler:               p.Handler,
		ErrorHandler:          p.errorHandler,
		HeaderReceived:        p.headerReceived,
		ExpectHandler:         p.expectContinue,
		Logger:                serverLog{o.Logger},
		MaxRequestBodySize:    o.Balancer.Snapshot().Config().Proxy.MaxRequestBody,
		ReadBufferSize:        readBufferSize,
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		NoDefaultContentType:  true,
		LazyRequestTime:       true,
		CloseOnShutdown:       true,
	}
	p.Reload()
	return p, nil
}

// Serve accepts client connections on ln until Shutdown. It returns nil after Shutdown, and an
// error when ln fails otherwise.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	p.serveLns = append(p.serveLns, ln)
	p.mu.Unlock()

	err := p.srv.Serve(ln)
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if err != nil && !stopped {
		return fmt.Errorf("serve proxy on %s: %w", ln.Addr(), err)
	}
	return nil
}

// Shutdown stops accepting connections, closes idle ones, and waits until the requests in
// flight have been answered or ctx ends (then it returns ctx's error and those requests still
// finish in the background). Responses written during shutdown carry "Connection: close".
// Teardown order: listeners, client connections as they go idle, then idle backend connections;
// the backend-timeout watchdog ends by itself once no backend connection is left.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.stopping.Store(true)
	p.mu.Lock()
	p.stopped = true
	lns := p.serveLns
	p.mu.Unlock()

	err := p.srv.ShutdownWithContext(ctx)
	// A Serve that had not handed its listener to the server yet when the server stopped would
	// otherwise accept forever.
	for _, ln := range lns {
		_ = ln.Close()
	}
	p.upstreams.closeIdle()
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		return fmt.Errorf("shut down proxy: %w", ctxErr)
	}
	if err != nil {
		// Closing a listener that its owner had already closed: nothing left to do.
		p.log.Debug("proxy listener close", "error", err)
	}
	return nil
}

// Reload applies the balancer's current configuration after a reload: clients of removed
// backends, and of backends whose capacity changed, are dropped (the latter are rebuilt with the
// new MaxConns on next use); metric series of removed apps are deleted. Timeouts, retries and
// the request body limit are read from the snapshot on every request and need nothing here.
func (p *Proxy) Reload() {
	snap := p.bal.Snapshot()
	p.upstreams.reload(snap)
	names := map[string]bool{}
	for _, a := range snap.Apps() {
		names[a.Name] = true
	}
	p.metrics.keep(names)
}

// headerReceived sets the body limit per request from the current configuration, so a reload
// can raise or lower it; fasthttp then rejects a larger body before reading it.
func (p *Proxy) headerReceived(*fasthttp.RequestHeader) fasthttp.RequestConfig {
	return fasthttp.RequestConfig{MaxRequestBodySize: p.bal.Snapshot().Config().Proxy.MaxRequestBody}
}

// errorHandler answers requests the server could not read (body over the limit, malformed or
// oversized headers) and counts them under the app their Host matches, if any.
func (p *Proxy) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	snap := p.bal.Snapshot()
	code := answerServerError(ctx, err, snap.Config().Proxy.MaxRequestBody)
	m := p.metrics.noApp
	if app := snap.Route(ctx.Host()); app != nil {
		m = p.metrics.app(app.Name)
	}
	m.count(code)
}

// serverLog routes fasthttp's own messages (mostly clients that went away mid-request) to the
// debug level.
type serverLog struct{ l *slog.Logger }

func (s serverLog) Printf(format string, args ...any) {
	s.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
}
