package poller

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"pollbal/protocol"
)

// reasonNotChecked is the Reason of a target before its first check.
const reasonNotChecked = "not checked yet"

// health is one target's rise/fall state. It is a plain value; next is a pure function.
type health struct {
	ready    bool
	everGood bool // some check has been good: rise applies only from then on
	okRun    int  // consecutive good checks
	failRun  int  // consecutive failed checks
}

// next returns the state after one more check. The first good check ever makes a target ready
// whatever rise says, so that a starting pollbal serves traffic after one round instead of
// rise rounds; after that, a not-ready target needs rise consecutive good checks, and a ready
// one turns not ready after fall consecutive failed checks.
func (h health) next(good bool, rise, fall int) health {
	if good {
		h.failRun = 0
		h.okRun++
		if !h.ready && (!h.everGood || h.okRun >= rise) {
			h.ready = true
		}
		h.everGood = true
		return h
	}
	h.okRun = 0
	h.failRun++
	if h.ready && h.failRun >= fall {
		h.ready = false
	}
	return h
}

// outcome is what one check found: either reports (good) or a reason (failed).
type outcome struct {
	reports  []protocol.Report // non-nil when the check was good
	load     *protocol.Load    // the good answer's X-Pool-Load report; nil when absent or malformed
	badLoad  string            // a malformed X-Pool-Load value (quoted, cut short); "" when none
	reason   string            // "" when the check was good
	result   string            // the checks_total result label
	duration time.Duration
}

func (o outcome) good() bool { return o.reason == "" }

// nextResult is the Result after a check with outcome o, given the previous Result, the new
// health h and the last good answer. It is a pure function.
func nextResult(prev Result, h health, o outcome, lastGood []protocol.Report, checked time.Time) Result {
	r := Result{
		ID:      prev.ID,
		Address: prev.Address,
		Ready:   h.ready,
		Reason:  o.reason,
		Checked: checked,
	}
	if h.ready {
		r.Reports = lastGood
	}
	return r
}

// transition says what to log about the step from prev to r, if anything: ready/not-ready
// transitions, and reason changes while the readiness stays. ok is false when nothing changed
// worth a line, so a target that keeps failing the same way logs once.
func transition(prev, r Result) (msg string, warn, ok bool) {
	switch {
	case r.Ready && !prev.Ready:
		return "backend ready", false, true
	case !r.Ready && prev.Ready:
		return "backend not ready", true, true
	case r.Reason == prev.Reason:
		return "", false, false
	case r.Reason != "":
		return "backend check failed", true, true
	default:
		return "backend check good", false, true
	}
}

// newBackoff returns the delay schedule of a failing target: interval, then doubling, capped at
// maxBackoff, never giving up and without jitter (targets keep the spread phases they started
// with, so failing targets do not bunch up).
func newBackoff(interval, maxBackoff time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     interval,
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         maxBackoff,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	return b
}
