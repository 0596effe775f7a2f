package balancer

import (
	"time"

	"pollbal/protocol"
)

// What flows into the balancer and out of it, each through one declared port:
//
//	in:  Observation  a check result, from the poller's sink          (Balancer.Observe)
//	in:  Result       what one forward learned, from the proxy        (Balancer.Report)
//	in:  Runtime      a previous process's state, once at start       (Balancer.Restore)
//	out: Observer     exhausted pools and fallbacks, to the alarms    (Options.Observer)
//	out: Events       changes the status page lists                   (Options.Events)
//
// Everything else a caller does is a read (Snapshot, Members, Pools, EachReady, ConfirmAfter,
// QueueLength, Runtime) or a lease it takes and releases (Acquire, Wait, Lease.Release).

// Observation is one check result for one backend, as the poller reports it.
type Observation struct {
	ID      string
	Address string // the address checked; a result for an address the backend no longer has is dropped
	Ready   bool
	Reason  string
	Reports []protocol.Report
	Checked time.Time
	// Load is the last good answer's X-Pool-Load report (nil when it had none); the balancer
	// stamps it with its own in-flight when it first sees it.
	Load *protocol.Load
}

// Outcome is how one forward ended, as far as scheduling cares.
type Outcome uint8

const (
	// Answered: the backend answered (Result.Code). It ends the backend's failure streak,
	// except for a 502, 503 or 504 under proxy.eject_on_5xx, which counts towards eject_after
	// like a failed forward.
	Answered Outcome = iota
	// RefusedFull: the backend refused the request as full (503 with X-Pool-Full) before doing
	// any work. Counted, and this instance's limit on it drops to what it holds until its next
	// report; never a failed forward, so never an ejection.
	RefusedFull
	// Failed: the forward failed (Result.Reason: connect, refused, reset or bad_response).
	// Counted per backend and reason, logged at warn at most once a second per backend, and,
	// unless the backend answered something unusable, counted towards eject_after.
	Failed
	// TimedOut: no complete answer within proxy.backend_timeout; a failed forward of reason
	// timeout.
	TimedOut
	// Exhausted: the request is answered as for an exhausted pool (no lease): its app's pool,
	// and default where it may fall back, had no candidate it could use. Counted in
	// pollbal_pool_exhausted_total and told to the Observer, which raises the alarm.
	Exhausted
)

// Result is what one forward learned, reported through Balancer.Report: a plain value.
type Result struct {
	Outcome Outcome
	App     *App        // the request's app
	Lease   Lease       // the lease the forward held (still held while it is reported); none for Exhausted
	Code    int         // Answered: the backend's status code
	Reason  ErrorReason // Failed: why
	Err     error       // Failed, TimedOut: what the round trip returned, for the log
}

// Observer hears what scheduling found that people are told about. Its methods are called on
// the request path and, for a fallback, while the queue's lock is held: they must not block and
// must not call the balancer. Values are plain strings, so that an Observer needs no import of
// this package.
type Observer interface {
	// Exhausted: a request for app (service, resolved pool) found no candidate it could use
	// (Outcome Exhausted); fallbackAllowed says whether default was tried too.
	Exhausted(pool, app, service string, fallbackAllowed bool)
	// FellBack: a request for app was served from default because its pool had no
	// available candidate.
	FellBack(pool, app, service string)
}

// Events is where the balancer notes the changes the status page lists: ready, not_ready,
// ejected, readmitted, admin_move and restored.
type Events interface {
	Add(kind, message string)
}

// quiet is the Observer and the Events of a balancer built without them.
type quiet struct{}

func (quiet) Exhausted(string, string, string, bool) {}
func (quiet) FellBack(string, string, string)        {}
func (quiet) Add(string, string)                     {}
