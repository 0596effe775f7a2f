package balancer

import "time"

// reportMaxAge is how many poll intervals a load report stays fresh: an older one counts as no
// report.
const reportMaxAge = 3

// Load is what a backend's last good /pool answer said about its own load (its X-Pool-Load
// header), kept with when the answer arrived and how many requests this instance had in
// flight on the backend at that moment. A Load value is immutable once published.
type Load struct {
	InFlight int64     // requests the backend had in progress, from every balancer and client
	Capacity int64     // the capacity it reported; 0 when it reported none
	At       time.Time // when the answer arrived
	MineThen int64     // this instance's in-flight on the backend when the answer arrived
}

// fleetInput is everything the per-instance limit of one backend depends on.
type fleetInput struct {
	Configured int64         // the backend's capacity in the configuration
	Instances  int           // fleet.instances
	Report     *Load         // the last good answer's report; nil when it carried none
	Now        time.Time     // the time the limit is computed for
	Interval   time.Duration // poll.interval: a report older than reportMaxAge intervals is dropped
}

// fleetDecision is the outcome of fleetLimit.
type fleetDecision struct {
	Capacity int64 // the backend's total capacity: the reported one when a fresh report has one
	Limit    int64 // what this instance may have in flight on it (before slow start)
	Fresh    bool  // the limit was computed from a report
}

// fleetLimit computes how many requests this instance may have in flight on a backend: with a
// fresh report, the backend's capacity minus what the other instances had in progress when it
// answered (max(0, capacity - max(0, reported - mine_then))); without one, an equal share,
// ceil(capacity / instances). It is a pure function.
func fleetLimit(in fleetInput) fleetDecision {
	capacity := max(in.Configured, 0)
	n := int64(max(in.Instances, 1))
	r := in.Report
	if r == nil || reportStale(r.At, in.Now, in.Interval) {
		return fleetDecision{Capacity: capacity, Limit: (capacity + n - 1) / n}
	}
	if r.Capacity > 0 {
		capacity = r.Capacity
	}
	others := max(0, r.InFlight-r.MineThen)
	return fleetDecision{Capacity: capacity, Limit: max(0, capacity-others), Fresh: true}
}

// reportStale reports whether a report that arrived at `at` is older than reportMaxAge
// intervals at now. A report from the future (a clock step) is fresh.
func reportStale(at, now time.Time, interval time.Duration) bool {
	return now.Sub(at) > reportMaxAge*interval
}
