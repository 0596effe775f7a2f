package poolload

import (
	"net/http"
	"sync/atomic"

	"pollbal/protocol"
)

// Header names of the protocol, for a backend that imports only this package.
const (
	HeaderLoad = protocol.HeaderLoad // on /pool answers: "<in_flight>/<capacity>"
	HeaderFull = protocol.HeaderFull // on a 503 that refused a request before doing any work
)

// Limiter counts a backend's requests in progress and refuses those over its capacity. It is
// safe for concurrent use and must not be copied.
type Limiter struct {
	capacity int64 // 0: unlimited, counting only
	inFlight atomic.Int64
	peak     atomic.Int64
	refused  atomic.Int64
}

// New returns a Limiter for capacity requests at once; capacity <= 0 counts without refusing
// (and reports no capacity).
func New(capacity int) *Limiter {
	return &Limiter{capacity: int64(max(capacity, 0))}
}

// Limit wraps the backend's client traffic: a request that would exceed the capacity is
// answered 503 with X-Pool-Full and Retry-After: 1 at once, without calling next; any other one
// counts as in progress until next returns.
func (l *Limiter) Limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.acquire() {
			l.refused.Add(1)
			w.Header().Set(HeaderFull, "1")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "full", http.StatusServiceUnavailable)
			return
		}
		defer l.inFlight.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// acquire takes one slot: a compare-and-swap loop, so the count never passes the capacity.
func (l *Limiter) acquire() bool {
	for {
		n := l.inFlight.Load()
		if l.capacity > 0 && n >= l.capacity {
			return false
		}
		if l.inFlight.CompareAndSwap(n, n+1) {
			for {
				p := l.peak.Load()
				if n+1 <= p || l.peak.CompareAndSwap(p, n+1) {
					return true
				}
			}
		}
	}
}

// Report wraps the /pool handler: its answer carries X-Pool-Load with the count at that moment.
func (l *Limiter) Report(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderLoad, l.Value())
		next.ServeHTTP(w, r)
	})
}

// Value is the X-Pool-Load value now: "<in_flight>/<capacity>", or "<in_flight>" without a
// capacity.
func (l *Limiter) Value() string { return protocol.FormatLoad(l.inFlight.Load(), l.capacity) }

// Capacity returns the capacity (0: unlimited).
func (l *Limiter) Capacity() int64 { return l.capacity }

// InFlight returns the requests in progress now.
func (l *Limiter) InFlight() int64 { return l.inFlight.Load() }

// Peak returns the most requests that were ever in progress at once.
func (l *Limiter) Peak() int64 { return l.peak.Load() }

// Refused returns how many requests were refused as over capacity.
func (l *Limiter) Refused() int64 { return l.refused.Load() }
