package alarms

import (
	"sync"
	"time"
)

// Event is one entry of the recent-event log shown on the status page.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // ready, not_ready, ejected, readmitted, restored, warning_started, warning_stopped, pool_exhausted, pool_fallback, admin_move, reload, store, store_unavailable
	Message string    `json:"message"`
}

// defaultEvents is how many events a Notifier's own ring keeps.
const defaultEvents = 100

// Events is a fixed-size ring of the most recent events. It is safe for concurrent use.
type Events struct {
	mu   sync.Mutex
	now  func() time.Time
	buf  []Event
	next int
	full bool
}

// NewEvents returns a ring that keeps the last size events.
func NewEvents(size int, now func() time.Time) *Events {
	if now == nil {
		now = time.Now
	}
	return &Events{now: now, buf: make([]Event, size)}
}

// Add records an event now.
func (e *Events) Add(kind, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf[e.next] = Event{Time: e.now(), Kind: kind, Message: message}
	e.next++
	if e.next == len(e.buf) {
		e.next, e.full = 0, true
	}
}

// List returns the events newest first.
func (e *Events) List() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.next
	if e.full {
		n = len(e.buf)
	}
	out := make([]Event, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, e.buf[(e.next-i+len(e.buf))%len(e.buf)])
	}
	return out
}
