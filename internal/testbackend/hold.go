package main

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
)

// holds keeps GET /hold requests open until POST /_backend/release, so that a test decides
// exactly how long a request occupies its slot (a capacity test must not depend on a delay
// outlasting a reload). It is safe for concurrent use and must not be copied.
type holds struct {
	mu   sync.Mutex
	gate chan struct{} // closed by the next release; nil while nothing waits on it
	held atomic.Int64  // /hold requests waiting now
}

// enter registers a held request and returns the gate it waits on.
func (hs *holds) enter() <-chan struct{} {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.gate == nil {
		hs.gate = make(chan struct{})
	}
	hs.held.Add(1)
	return hs.gate
}

// release lets every request held now answer and returns how many there were.
func (hs *holds) release() int64 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := hs.held.Load()
	if hs.gate != nil {
		close(hs.gate)
		hs.gate = nil
	}
	return n
}

// serveHold answers GET /hold like any other path ("<id>\n", counted in in_flight,
// peak_in_flight and requests), but only once POST /_backend/release was called after it
// arrived, or ends when the client goes away.
func (h *handler) serveHold(w http.ResponseWriter, r *http.Request) {
	defer h.count()()
	gate := h.holds.enter()
	defer h.holds.held.Add(-1)
	select {
	case <-gate:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Backend-Id", h.o.ID)
	_, _ = fmt.Fprintf(w, "%s\n", h.o.ID)
}

// serveRelease answers POST /_backend/release: every /hold request waiting now answers; the
// body says how many, {"released": N}.
func (h *handler) serveRelease(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	n := h.holds.release()
	writeJSON(w, map[string]int64{"released": n})
}
