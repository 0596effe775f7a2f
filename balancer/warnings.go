package balancer

import (
	"fmt"
	"strings"

	"pollbal/warning"
)

// GroupState is one warning group as shown in the state API and metrics.
type GroupState struct {
	Pool      string   `json:"pool"`
	Service   string   `json:"service"`
	Version   string   `json:"version"`
	Serving   int      `json:"serving"`
	Leaving   int      `json:"leaving"`
	Threshold int      `json:"threshold"`
	Warned    []string `json:"warned"`
}

// Members lists every ready backend's reports with the node pool it belongs to now: the input
// of warning.Decide.
func (b *Balancer) Members() []warning.Member {
	s := b.Snapshot()
	var out []warning.Member
	for _, m := range s.members {
		h := m.b.Health()
		if !h.Ready {
			continue
		}
		for _, r := range h.Reports {
			out = append(out, warning.Member{
				Backend: m.cfg.ID, Pool: m.pool, Service: r.Service, Version: r.Version,
				Leaving: r.Status == StatusLeaving,
			})
		}
	}
	return out
}

// Policies returns each declared service's warning policy.
func (b *Balancer) Policies() map[string]warning.Policy {
	s := b.Snapshot()
	out := make(map[string]warning.Policy, len(s.cfg.Services))
	for name, svc := range s.cfg.Services {
		out[name] = warning.Policy{Threshold: svc.WarningThreshold, Scope: svc.WarningScope}
	}
	return out
}

// SetWarnings records the groups decided after a check round, flags the warned backends (with
// an event when a backend starts or stops being warned) and returns one POST target per warned
// backend and group.
func (b *Balancer) SetWarnings(groups []warning.Group) []warning.Target {
	s := b.Snapshot()
	states := make([]GroupState, 0, len(groups))
	warned := map[string]bool{}
	var targets []warning.Target
	for _, g := range groups {
		states = append(states, GroupState{
			Pool: g.Pool, Service: g.Service, Version: g.Version,
			Serving: len(g.Serving), Leaving: len(g.Leaving), Threshold: g.Threshold,
			Warned: append([]string{}, g.Warned...),
		})
		for _, id := range g.Warned {
			m := s.byID[id]
			if m == nil {
				continue
			}
			warned[id] = true
			targets = append(targets, warning.Target{Backend: id, Address: m.cfg.Address, Group: g})
		}
	}
	b.mu.Lock()
	b.warnings = states
	b.mu.Unlock()
	var started, stopped []string
	for _, m := range s.members {
		now := warned[m.cfg.ID]
		if m.b.warned.Swap(now) != now {
			if now {
				started = append(started, m.cfg.ID)
			} else {
				stopped = append(stopped, m.cfg.ID)
			}
		}
	}
	if len(started) > 0 {
		b.events.Add("warning_started", fmt.Sprintf("warning %s: needed to keep the threshold", strings.Join(started, ", ")))
	}
	if len(stopped) > 0 {
		b.events.Add("warning_stopped", fmt.Sprintf("no longer warning %s", strings.Join(stopped, ", ")))
	}
	return targets
}

// Groups returns the groups decided after the last check round.
func (b *Balancer) Groups() []GroupState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]GroupState(nil), b.warnings...)
}
