package accesslog

import (
	"fmt"
	"time"

	"pollbal/configs"
)

// maxStatus bounds the statuses a Filter can list; configs accepts 100 to 599.
const maxStatus = 640

// Filter is which requests the log keeps: access_log's statuses, min_duration and sample,
// compiled. A Filter is a plain value, safe to share once built.
type Filter struct {
	statuses    [maxStatus / 64]uint64 // bit s: status s is listed
	listed      bool                   // statuses is not empty
	minDuration time.Duration
	sample      float64
}

// NewFilter compiles the filters of an access_log section; configs.Validate checks the same
// rules for users.
func NewFilter(c configs.AccessLog) (Filter, error) {
	f := Filter{minDuration: c.MinDuration, sample: c.Sample}
	if !(c.Sample > 0 && c.Sample <= 1) {
		return Filter{}, fmt.Errorf("access_log.sample %v: must be > 0 and <= 1", c.Sample)
	}
	for _, s := range c.Statuses {
		first, last, err := configs.ParseStatusPattern(s)
		if err != nil {
			return Filter{}, fmt.Errorf("access_log.statuses: %w", err)
		}
		for st := first; st <= last; st++ {
			f.statuses[st/64] |= 1 << (st % 64)
		}
		f.listed = true
	}
	return f, nil
}

// Sampled reports whether Keep needs a draw: whether sample is below 1.
func (f *Filter) Sampled() bool { return f.sample < 1 }

// Keep decides whether a request is logged. pollbal's own answers (own: the record has a
// Reason) and 5xx are always logged. Any other request must have a listed status — or, with
// statuses listed and min_duration above 0, have taken longer than min_duration — and then
// passes when draw, uniform in [0, 1), is below sample (always, with sample 1).
func (f *Filter) Keep(status int, duration time.Duration, own bool, draw float64) bool {
	if own || status >= 500 && status <= 599 {
		return true
	}
	if f.listed && !f.lists(status) && !(f.minDuration > 0 && duration > f.minDuration) {
		return false
	}
	return draw < f.sample
}

func (f *Filter) lists(status int) bool {
	return status >= 0 && status < maxStatus && f.statuses[status/64]&(1<<(status%64)) != 0
}
