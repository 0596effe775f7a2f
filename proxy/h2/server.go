//lint:file-ignore SA1019 x/net/http2's Server is deprecated for net/http's own HTTP/2, which serves only connections it accepts itself: pollbal needs ServeConn, to serve a connection that fasthttp hands over after ALPN or that its listener recognised by the preface (see doc.go).

package h2

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"pollbal/internal/defaults"
)

// Protocols, the proto label of the metrics.
const (
	ProtoTLS       = "h2"  // negotiated by ALPN on the TLS listener
	ProtoCleartext = "h2c" // prior knowledge on the plain listener
)

// Per-stream and per-connection receive buffers: what one stream, and one connection with all
// its streams, may have sent that its handlers have not read yet (HTTP/2 flow control holds
// the client to them).
const (
	streamRecvBuffer = 256 << 10
	connRecvBuffer   = 1 << 20
)

// defaultMaxHeaderBytes is MaxHeaderBytes when Options leave it 0 (http2.max_header_bytes'
// default).
const defaultMaxHeaderBytes = 64 << 10

// Options configure a Server.
type Options struct {
	// Handler serves each stream as a request: the proxy's HTTP/1.1 handler.
	Handler fasthttp.RequestHandler
	// MaxConcurrentStreams and MaxHeaderBytes are http2.max_concurrent_streams and
	// http2.max_header_bytes.
	MaxConcurrentStreams int
	MaxHeaderBytes       int
	// IdleTimeout closes a connection without open streams (proxy.idle_timeout);
	// ClientTimeout cuts one whose client reads nothing for that long, and fails a stream's
	// body read that waits that long (proxy.client_timeout).
	IdleTimeout   time.Duration
	ClientTimeout time.Duration
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// Server serves HTTP/2 client connections. It is safe for concurrent use and must not be
// copied.
type Server struct {
	handler fasthttp.RequestHandler
	h2      *http2.Server
	base    *http.Server // carries MaxHeaderBytes, and starts the graceful shutdown of every connection
	maxHdr  int
	// clientTimeout bounds each read of a request body (proxy.client_timeout).
	clientTimeout time.Duration
	log           *slog.Logger
	flog          fastLog
	metrics       *metrics
	streams       sync.Pool // *stream, one per stream being served

	mu      sync.Mutex // guards conns and done
	conns   map[*clientConn]struct{}
	drained chan struct{} // closed when conns empties during a shutdown; nil before
	stopped bool
}

// New builds a Server.
func New(o Options) (*Server, error) {
	if o.Handler == nil {
		return nil, errors.New("h2: nil handler")
	}
	o.Logger = defaults.Logger(o.Logger)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	m, err := newMetrics(defaults.Registerer(o.Registerer))
	if err != nil {
		return nil, err
	}
	s := &Server{
		handler:       o.Handler,
		maxHdr:        o.MaxHeaderBytes,
		clientTimeout: o.ClientTimeout,
		log:           o.Logger,
		flog:          fastLog{o.Logger},
		metrics:       m,
		conns:         map[*clientConn]struct{}{},
	}
	s.h2 = &http2.Server{
		MaxConcurrentStreams:         uint32(o.MaxConcurrentStreams),
		MaxDecoderHeaderTableSize:    4096,
		MaxReadFrameSize:             16 << 10, // RFC 9113's initial SETTINGS_MAX_FRAME_SIZE
		IdleTimeout:                  o.IdleTimeout,
		WriteByteTimeout:             o.ClientTimeout,
		MaxUploadBufferPerConnection: connRecvBuffer,
		MaxUploadBufferPerStream:     streamRecvBuffer,
	}
	s.base = &http.Server{
		// The frame watch cuts a header block at MaxHeaderBytes on the wire. The decoded
		// limit is twice that, so that the watch, which counts the cut, comes first for
		// ordinary header fields; a block that decodes to far more than it takes on the
		// wire (HPACK table references) is still refused by the HTTP/2 server itself.
		MaxHeaderBytes: 2 * o.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	if err := http2.ConfigureServer(s.base, s.h2); err != nil {
		return nil, fmt.Errorf("h2: configure server: %w", err)
	}
	return s, nil
}

// ServeConn serves the HTTP/2 connection nc until it ends, and closes it. proto is ProtoTLS
// or ProtoCleartext; sawPreface says that the client preface was already read from nc.
func (s *Server) ServeConn(nc net.Conn, proto string, sawPreface bool) {
	c := newClientConn(nc, proto, s, newFrameWatch(!sawPreface, s.maxHdr))
	// Only the TLS listener's connections: an h2c one reports a ConnectionState too (the
	// proxy's preface check), without TLS.
	if st, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok && proto == ProtoTLS {
		state := st.ConnectionState()
		c.tls = &state
	}
	if !s.track(c) {
		_ = c.Close()
		return
	}
	defer s.forget(c)
	defer c.Close()
	ctx := context.WithValue(context.Background(), connKey{}, c)
	s.h2.ServeConn(c, &http2.ServeConnOpts{
		Context:          ctx,
		BaseConfig:       s.base,
		Handler:          http.HandlerFunc(s.serveStream),
		SawClientPreface: sawPreface,
	})
}

// connKey keys a stream's clientConn in its request's context.
type connKey struct{}

func (s *Server) track(c *clientConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) forget(c *clientConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if len(s.conns) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// Shutdown sends every connection a GOAWAY: the streams open finish, no new one starts, and
// each connection closes once its streams are done. It returns once every connection is
// gone, or when ctx ends: then the connections left are closed (their streams end as if the
// client went away) and ctx's error is returned. Later connections are closed at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	var drained chan struct{}
	if len(s.conns) > 0 {
		drained = make(chan struct{})
		s.drained = drained
	}
	s.mu.Unlock()
	if drained == nil {
		return nil
	}
	// Without listeners of its own, the base server's Shutdown only tells the HTTP/2
	// connections to go away gracefully.
	_ = s.base.Shutdown(ctx)
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	left := make([]*clientConn, 0, len(s.conns))
	for c := range s.conns {
		left = append(left, c)
	}
	s.mu.Unlock()
	for _, c := range left {
		_ = c.Close()
	}
	return fmt.Errorf("h2: shut down: %w", ctx.Err())
}

// metrics are the HTTP/2 metrics, children resolved ahead of time.
type metrics struct {
	streams map[string]prometheus.Gauge              // by proto
	cuts    map[string]map[string]prometheus.Counter // by proto, reason
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	streams := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pollbal_client_streams",
		Help: "HTTP/2 streams open from clients, by proto (h2: TLS, h2c: prior knowledge on the plain listener).",
	}, []string{"proto"})
	resets := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pollbal_http2_resets_total",
		Help: "HTTP/2 client connections cut off, by proto and reason: rapid_reset (streams reset faster than completed), continuation (a header block over http2.max_header_bytes), malformed (a request with a connection-specific header field).",
	}, []string{"proto", "reason"})
	for _, c := range []prometheus.Collector{streams, resets} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("h2: register metrics: %w", err)
		}
	}
	m := &metrics{streams: map[string]prometheus.Gauge{}, cuts: map[string]map[string]prometheus.Counter{}}
	for _, proto := range []string{ProtoTLS, ProtoCleartext} {
		m.streams[proto] = streams.WithLabelValues(proto)
		m.cuts[proto] = map[string]prometheus.Counter{}
		for _, reason := range []string{reasonRapidReset, reasonContinuation, reasonMalformed} {
			m.cuts[proto][reason] = resets.WithLabelValues(proto, reason)
		}
	}
	return m, nil
}

func (m *metrics) cut(proto, reason string) prometheus.Counter { return m.cuts[proto][reason] }

// fastLog routes fasthttp's messages about a stream to the debug level.
type fastLog struct{ l *slog.Logger }

func (f fastLog) Printf(format string, args ...any) {
	f.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
}
