package balancer

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/protocol"
)

// Health is the result of a backend's checks as last observed. A Health value is immutable once
// published.
type Health struct {
	Ready   bool
	Reason  string
	Reports []protocol.Report // declared services only; nil when not ready
	Ignored []string          // services the backend reported that the config does not declare
	Checked time.Time
	// ReadySince is when the backend last became ready after a check that found it not ready;
	// zero when it has been ready since its first check (slow start does not apply then).
	ReadySince time.Time
	// Restored: this health was restored from a previous process's state (Restore); the
	// first check replaces it.
	Restored bool
}

// Backend is the runtime state of one configured backend (id and address) that outlives
// snapshots: its health and its forward-failure streak. Its leases are counted in the slot of
// its address, which outlives the Backend itself (slot.go). It is safe for concurrent use and
// must not be copied.
type Backend struct {
	ID      string
	Address string

	slot       *slot
	limit      atomic.Int64         // what this instance may have in flight on it, before slow start (fleet.go)
	load       atomic.Pointer[Load] // its last good answer's load report; nil when it had none
	full       prometheus.Counter   // pollbal_backend_full_total{backend}: refusals with X-Pool-Full
	failStreak atomic.Int64
	ejected    atomic.Bool
	health     atomic.Pointer[Health]

	// errors are pollbal_backend_errors_total{backend,reason}, by ErrorReason.
	errors [numErrorReasons]prometheus.Counter
	// lastLogged is when the last warn line about a failed forward was written (Unix
	// nanoseconds, 0: never); unlogged counts the failures left out since (failures.go).
	lastLogged, unlogged atomic.Int64
}

func newBackend(id, address string, s *slot) *Backend {
	b := &Backend{ID: id, Address: address, slot: s}
	b.health.Store(&Health{Reason: "not checked yet"})
	return b
}

// InFlight returns the number of leases this instance holds on the backend's address, whatever
// configuration they were taken under.
func (b *Backend) InFlight() int64 { return b.slot.count() }

// StrayReleases returns how many releases on the backend's address found no lease in flight:
// a Lease released twice (through a copy), which is a bug. Once no lease is held it is exactly
// the number of extra releases, wherever they fell.
func (b *Backend) StrayReleases() int64 { return b.slot.stray.Load() }

// Health returns the last published health.
func (b *Backend) Health() *Health { return b.health.Load() }

// Load returns the backend's last load report (nil when its last good answer carried none), with
// this instance's in-flight on it when the answer arrived.
func (b *Backend) Load() *Load { return b.load.Load() }

// Ejected reports whether consecutive forward failures took the backend out until its next good check.
func (b *Backend) Ejected() bool { return b.ejected.Load() }
