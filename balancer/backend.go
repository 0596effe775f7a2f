package balancer

import (
	"sync/atomic"
	"time"
)

// Report is one service line of a backend's last good /pool answer.
type Report struct {
	Service string `json:"service"`
	Status  string `json:"status"` // "serving" or "leaving"
	Version string `json:"version"`
}

// Status values of a Report.
const (
	StatusServing = "serving"
	StatusLeaving = "leaving"
)

// Health is the result of a backend's checks as last observed. A Health value is immutable once
// published.
type Health struct {
	Ready   bool
	Reason  string
	Reports []Report // declared services only; nil when not ready
	Ignored []string // services the backend reported that the config does not declare
	Checked time.Time
	// ReadySince is when the backend last became ready after a check that found it not ready;
	// zero when it has been ready since its first check (slow start does not apply then).
	ReadySince time.Time
}

// Backend is the runtime state of one configured backend that outlives snapshots: its health,
// its in-flight count (the leases) and its forward-failure streak. It is safe for concurrent use
// and must not be copied.
type Backend struct {
	ID      string
	Address string

	inFlight   atomic.Int64
	failStreak atomic.Int64
	ejected    atomic.Bool
	warned     atomic.Bool
	health     atomic.Pointer[Health]
	hints      atomic.Pointer[[]hintReg] // block hints of the current candidate sets it is in
}

func newBackend(id, address string) *Backend {
	b := &Backend{ID: id, Address: address}
	b.health.Store(&Health{Reason: "not checked yet"})
	return b
}

// InFlight returns the number of leases currently held on the backend by this instance.
func (b *Backend) InFlight() int64 { return b.inFlight.Load() }

// Health returns the last published health.
func (b *Backend) Health() *Health { return b.health.Load() }

// Ejected reports whether consecutive forward failures took the backend out until its next good check.
func (b *Backend) Ejected() bool { return b.ejected.Load() }

// tryAcquire takes one slot if fewer than limit are in flight: one atomic check-and-take, so no
// interleaving of callers can put more than limit leases on the backend.
func (b *Backend) tryAcquire(limit int64) bool {
	for {
		n := b.inFlight.Load()
		if n >= limit {
			return false
		}
		if b.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release returns a slot and raises the spare hints of the blocks the backend is in, so a pick
// never skips a block that now holds more spare than its hint says.
func (b *Backend) release() {
	n := b.inFlight.Add(-1)
	if regs := b.hints.Load(); regs != nil {
		for _, r := range *regs {
			r.hint.raise(r.capacity - n)
		}
	}
}
