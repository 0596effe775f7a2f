package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"pollbal/balancer"
	"pollbal/internal/alarms"
	"pollbal/internal/defaults"
	"pollbal/internal/store"
	"pollbal/warning"
)

// defaultRefresh is how often the status page reloads itself.
const defaultRefresh = 2 * time.Second

// Options configure a Server.
type Options struct {
	Balancer  *balancer.Balancer
	Warnings  *warning.Tracker    // the warning round: groups and warned flags in the state
	Events    *alarms.Events      // the recent events the state and the page list
	Version   string              // pollbal's version, shown in the state
	Gatherer  prometheus.Gatherer // served at /metrics
	TokenFile string              // bearer token for /admin/*; "" → /admin/* answers 403
	// Store is where moves live: PUT and DELETE /admin/backends/{id}/pool go through it, and
	// /api/state shows its status.
	Store store.Store
	// Reload is POST /admin/reload (same as SIGHUP; ?force=true passes force); nil → 501. A
	// rejection's reason (configs.ReasonOf) is answered and audited.
	Reload func(ctx context.Context, force bool) error
	// Upgrade is POST /admin/upgrade (same as SIGUSR2): it returns the new process's pid once
	// it is ready, or why not (the handover sentinels answer 409); nil → 501.
	Upgrade func(ctx context.Context) (pid int, err error)
	// Started is when the process started, shown in the state; zero means when New ran.
	Started time.Time
	// Limits bound the admin connections (Serve); a zero field means no limit.
	Limits     Limits
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Refresh is how often the status page reloads itself; 0 means 2 s.
	Refresh time.Duration
}

// settings are the parts of the configuration a reload may change. They are replaced wholesale.
type settings struct {
	digest *[32]byte // SHA-256 of the token; nil when no token_file is configured
	limits Limits
}

// Server serves the admin listener. It is safe for concurrent use and must not be copied.
type Server struct {
	bal      *balancer.Balancer
	warnings *warning.Tracker
	events   *alarms.Events
	version  string
	reload   func(ctx context.Context, force bool) error
	upgrade  func(ctx context.Context) (int, error)
	started  time.Time
	log      *slog.Logger
	refresh  time.Duration
	page     *template.Template
	handler  http.Handler
	settings atomic.Pointer[settings]
	store    store.Store

	http  *http.Server
	conns *conns
	// base is every request's parent context; Shutdown cancels it, so that a request waiting
	// (a reload queued behind another) gives up instead of holding the shutdown.
	base       context.Context
	cancelBase context.CancelFunc
}

// New builds a Server. A configured token file must be readable and non-empty.
func New(o Options) (*Server, error) {
	if o.Balancer == nil {
		return nil, errors.New("admin: nil balancer")
	}
	if o.Warnings == nil {
		return nil, errors.New("admin: nil warnings")
	}
	if o.Events == nil {
		return nil, errors.New("admin: nil events")
	}
	if o.Gatherer == nil {
		return nil, errors.New("admin: nil gatherer")
	}
	if o.Store == nil {
		return nil, errors.New("admin: nil store")
	}
	o.Logger = defaults.Logger(o.Logger)
	if o.Refresh <= 0 {
		o.Refresh = defaultRefresh
	}
	digest, err := readToken(o.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("admin.token_file: %w", err)
	}
	page, err := parsePage()
	if err != nil {
		return nil, err
	}
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	s := &Server{bal: o.Balancer, warnings: o.Warnings, events: o.Events, version: o.Version, reload: o.Reload, upgrade: o.Upgrade,
		started: o.Started, log: o.Logger, refresh: o.Refresh, page: page, store: o.Store}
	s.settings.Store(&settings{digest: digest, limits: o.Limits})
	s.conns, err = newConns(func() Limits { return s.settings.Load().limits }, o.Logger, defaults.Registerer(o.Registerer))
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveStatusPage)
	mux.HandleFunc("GET /api/state", s.serveState)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(o.Logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", serveHealthz)
	mux.HandleFunc("GET /readyz", s.serveReadyz)
	// /admin/* bypasses the mux, whose path cleaning would answer unclean paths with a redirect
	// before the audit line is written: every admin call is routed and audited by serveAdmin.
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/admin/") {
			s.serveAdmin(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.http = &http.Server{
		Handler:      s.handler,
		ReadTimeout:  ioTimeout, // with no ReadHeaderTimeout, it bounds every request head too
		WriteTimeout: ioTimeout,
		// Negative: no deadline of the server's own between requests; the connection's timer
		// (Limits.IdleTimeout) closes it, so that a reload can change the timeout.
		IdleTimeout: -1,
		ConnState:   s.conns.track,
		BaseContext: func(net.Listener) context.Context { return s.base },
	}
	return s, nil
}

// Handler returns the handler for admin.listen.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves the admin handler on ln within the Limits until Shutdown; it then returns
// http.ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	return s.http.Serve(&limitListener{Listener: ln, c: s.conns})
}

// Shutdown stops serving: it closes the listener and the idle connections, cancels the
// requests' context, and waits for the requests in flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancelBase()
	return s.http.Shutdown(ctx)
}

// Change is a reloaded configuration's admin settings, read and checked by Prepare and applied
// by Apply. It is immutable.
type Change struct {
	digest *[32]byte
	limits Limits
}

// Prepare reads what a reloaded configuration's admin settings name and checks it, changing
// nothing: the new token file must be readable and non-empty.
func (s *Server) Prepare(tokenFile string, limits Limits) (*Change, error) {
	digest, err := readToken(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("admin.token_file: %w", err)
	}
	return &Change{digest: digest, limits: limits}, nil
}

// Apply applies a prepared change.
func (s *Server) Apply(c *Change) {
	s.settings.Store(&settings{digest: c.digest, limits: c.limits})
}

func (s *Server) serveState(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, stateAnswer{State: s.state(), Store: s.store.Status()})
}

func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok\n")
}

func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	if !s.bal.Ready() {
		writeText(w, http.StatusServiceUnavailable, "not ready: the first check round has not finished\n")
		return
	}
	writeText(w, http.StatusOK, "ready\n")
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// writeJSON writes v as the JSON body of a response with the given status.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		body = []byte(`{"error":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// errorBody is every JSON error answer: {"error":"..."}.
type errorBody struct {
	Error    string   `json:"error"`
	Reason   string   `json:"reason,omitempty"` // why a reload was rejected (configs.Reject* reasons)
	Problems []string `json:"problems,omitempty"`
}
