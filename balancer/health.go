package balancer

import (
	"slices"

	"pollbal/configs"
	"pollbal/protocol"
)

// healthChange says what one check result changed in a backend's health, and so what applying
// it must do.
type healthChange struct {
	// Visible: readiness, the reports or the ignored services changed, which the candidate
	// sets and the state show; anything else (check time, reason) is published without a
	// rebuild.
	Visible bool
	// ReadyChanged: readiness flipped (a ready or not_ready event).
	ReadyChanged bool
	// NewIgnored: the backend now reports a different, non-empty list of services the config
	// does not declare (one warning in the log per change, not per check).
	NewIgnored bool
}

// nextHealth returns a backend's health after check result o, given its health before (never
// nil: a backend starts "not checked yet") and the services the config declares, and what
// changed. Reports for undeclared services move to Ignored; a backend that is not ready keeps
// neither. Slow start restarts (ReadySince = o.Checked) only when the backend becomes ready
// after a check that found it not ready, not on its very first check. It is pure.
func nextHealth(old *Health, o Observation, declared map[string]configs.Service) (*Health, healthChange) {
	h := &Health{Ready: o.Ready, Reason: o.Reason, Checked: o.Checked, ReadySince: old.ReadySince}
	if o.Ready {
		for _, r := range o.Reports {
			if _, ok := declared[r.Service]; ok {
				h.Reports = append(h.Reports, r)
			} else {
				h.Ignored = append(h.Ignored, r.Service)
			}
		}
		if !old.Ready && !old.Checked.IsZero() {
			h.ReadySince = o.Checked
		}
	}
	ignoredChanged := !slices.Equal(h.Ignored, old.Ignored)
	c := healthChange{
		ReadyChanged: h.Ready != old.Ready,
		NewIgnored:   ignoredChanged && len(h.Ignored) > 0,
	}
	c.Visible = c.ReadyChanged || ignoredChanged || !protocol.EqualReports(h.Reports, old.Reports)
	return h, c
}
