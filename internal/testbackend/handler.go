package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"pollbal/internal/testbackend/api"
	"pollbal/internal/testbackend/poolload"
	"pollbal/protocol"
)

// maxWarningBody bounds the /pool_warning body read into memory.
const maxWarningBody = 64 << 10

// maxSkew is how far X-Pollbal-Timestamp may be from the backend's clock.
const maxSkew = 300 * time.Second

type handlerOptions struct {
	ID       string
	PoolFile string
	LockFile string
	Secret   []byte // nil: /pool_warning is not authenticated
	Delay    time.Duration
	// Capacity > 0: client requests past this many at once are refused with 503 and
	// X-Pool-Full, and /pool answers carry X-Pool-Load (unless NoLoadReport).
	Capacity     int
	NoLoadReport bool
	Logger       *slog.Logger
	Now          func() time.Time
}

// handler serves the example backend. It is safe for concurrent use and must not be copied.
type handler struct {
	o handlerOptions

	inFlight atomic.Int64
	peak     atomic.Int64
	requests atomic.Int64
	warnings atomic.Int64
	streams  streams           // the streaming endpoints' counters (streaming.go)
	load     *poolload.Limiter // every client request, counted and limited to Capacity
	routes   routes            // every path; the client paths behind load
	holds    holds             // GET /hold requests waiting for POST /_backend/release (hold.go)
	// websockets counts the WebSocket connections /ws accepted (websocket.go).
	websockets atomic.Int64

	mu          sync.Mutex
	lastWarning string
}

func newHandler(o handlerOptions) *handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &handler{o: o, load: poolload.New(o.Capacity)}
	// The protocol's paths and /_backend/* answer at once; every other path is client
	// traffic, served once the capacity limit lets it in.
	client := routes{paths: map[string]http.HandlerFunc{
		"/blob":   h.serveBlob,
		"/upload": h.serveUpload,
		"/switch": h.serveSwitch,
		"/hold":   h.serveHold,
		"/ws":     h.serveWebSocket,
		"/status": h.serveStatus,
	}, other: http.HandlerFunc(h.serveOther)}
	h.routes = routes{paths: map[string]http.HandlerFunc{
		protocol.PathPool:    h.servePool,
		protocol.PathWarning: h.serveWarning,
		"/_backend/stats":    h.serveStats,
		"/_backend/headers":  h.serveHeaders,
		"/_backend/streams":  h.serveStreamStats,
		"/_backend/release":  h.serveRelease,
	}, other: h.load.Limit(client)}
	return h
}

// routes serves a request by its exact path, and with other when no path matches.
type routes struct {
	paths map[string]http.HandlerFunc
	other http.Handler
}

func (rt routes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serve, ok := rt.paths[r.URL.Path]; ok {
		serve(w, r)
		return
	}
	rt.other.ServeHTTP(w, r)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.routes.ServeHTTP(w, r)
}

func (h *handler) servePool(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var body []byte
	if h.o.PoolFile != "" {
		b, err := os.ReadFile(h.o.PoolFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// A missing pool file means "in no service": ready, but out of rotation.
		case err != nil:
			h.o.Logger.Error("read pool file", "err", err)
			http.Error(w, "cannot read pool file", http.StatusInternalServerError)
			return
		default:
			body = b
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Backend-Id", h.o.ID)
	if h.o.Capacity > 0 && !h.o.NoLoadReport {
		w.Header().Set(protocol.HeaderLoad, h.load.Value())
	}
	_, _ = w.Write(body)
}

func (h *handler) serveWarning(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWarningBody))
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	if h.o.Secret != nil {
		err := protocol.Verify(h.o.Secret, r.Header.Get(protocol.HeaderTimestamp),
			r.Header.Get(protocol.HeaderSignature), body, h.o.Now(), maxSkew)
		if err != nil {
			h.o.Logger.Warn("rejected pool warning", "remote", r.RemoteAddr, "err", err)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	if h.o.LockFile != "" {
		if err := touch(h.o.LockFile, h.o.Now()); err != nil {
			h.o.Logger.Error("touch lock file", "err", err)
			http.Error(w, "cannot touch lock file", http.StatusInternalServerError)
			return
		}
	}
	h.warnings.Add(1)
	h.mu.Lock()
	h.lastWarning = string(body)
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) serveStats(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	last := h.lastWarning
	h.mu.Unlock()
	s := api.Stats{
		ID:           h.o.ID,
		InFlight:     h.inFlight.Load(),
		PeakInFlight: h.peak.Load(),
		Requests:     h.requests.Load(),
		Warnings:     h.warnings.Load(),
		LastWarning:  last,
		Capacity:     h.load.Capacity(),
		LoadInFlight: h.load.InFlight(),
		LoadPeak:     h.load.Peak(),
		Refused:      h.load.Refused(),
		WebSockets:   h.websockets.Load(),
	}
	writeJSON(w, s)
}

// count counts a client request in requests, in_flight and peak_in_flight; the function it
// returns ends it.
func (h *handler) count() (done func()) {
	h.requests.Add(1)
	n := h.inFlight.Add(1)
	for {
		p := h.peak.Load()
		if n <= p || h.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return func() { h.inFlight.Add(-1) }
}

// wait pauses for d, and reports false when done closes first. (The timer needs no Stop: an
// unreferenced timer is collected whether or not it fired.)
func wait(done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-done:
		return false
	}
}

// writeJSON answers v as JSON that no cache keeps.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func (h *handler) serveOther(w http.ResponseWriter, r *http.Request) {
	defer h.count()()
	if !wait(r.Context().Done(), h.o.Delay) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Backend-Id", h.o.ID)
	// What the proxy said the client's scheme was, for tests of TLS termination.
	w.Header().Set("X-Backend-Forwarded-Proto", r.Header.Get("X-Forwarded-Proto"))
	_, _ = fmt.Fprintf(w, "%s\n", h.o.ID)
}

// serveStatus answers the status that ?code= names (200 to 599), with the body "<code>\n":
// a backend's own 4xx or 5xx, for testing what a proxy does with them.
func (h *handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	defer h.count()()
	code, err := strconv.Atoi(r.URL.Query().Get("code"))
	if err != nil || code < 200 || code > 599 {
		http.Error(w, "code must be a status from 200 to 599", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Backend-Id", h.o.ID)
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "%d\n", code)
}

// touch creates path if missing and sets its modification time to now.
func touch(path string, now time.Time) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("touch %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("touch %s: %w", path, err)
	}
	if err := os.Chtimes(path, now, now); err != nil {
		return fmt.Errorf("touch %s: %w", path, err)
	}
	return nil
}
