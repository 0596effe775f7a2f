package balancer

import (
	"fmt"
	"slices"

	"pollbal/configs"
)

// Runtime is what the balancer knows of one backend beyond its configuration: its health
// (readiness, reports, slow start), its last load report and its ejection. Runtime takes it
// from a running balancer and Restore gives it to the balancer of the process that follows
// (package runstate keeps it in between). A plain value; Health's slices and Load are shared
// and must not be modified.
type Runtime struct {
	ID, Address string
	Health      Health
	Load        *Load // nil: no report
	Ejected     bool
	FailStreak  int64 // consecutive failed forwards, towards proxy.eject_after
}

// Runtime returns the runtime state of every backend of the current configuration.
func (b *Balancer) Runtime() []Runtime {
	s := b.Snapshot()
	out := make([]Runtime, 0, len(s.members))
	for _, m := range s.members {
		rt := m.b
		out = append(out, Runtime{
			ID: rt.ID, Address: rt.Address, Health: *rt.Health(), Load: rt.Load(),
			Ejected: rt.Ejected(), FailStreak: rt.failStreak.Load(),
		})
	}
	return out
}

// Restore gives each backend of the current configuration the runtime state saved for its
// address (by configs.AddressKey, whatever its id was; the first entry of an address listed
// twice) and returns how many it restored. A backend without an entry stays "not checked yet".
// A restored health is marked Restored until the backend's first check, and its reports are
// split again by the services the configuration declares now. It rebuilds the snapshot once.
//
// When it restored any backend the balancer is Ready at once: it knows what the previous
// process knew after its check rounds. Call it before the first check, so that no check
// result is overwritten by an older one.
func (b *Balancer) Restore(saved []Runtime) int {
	byAddr := make(map[string]Runtime, len(saved))
	for _, r := range saved {
		k := configs.AddressKey(r.Address)
		if _, dup := byAddr[k]; !dup {
			byAddr[k] = r
		}
	}
	b.mu.Lock()
	n := 0
	for _, rt := range b.backends {
		r, ok := byAddr[configs.AddressKey(rt.Address)]
		if !ok {
			continue
		}
		rt.health.Store(restoredHealth(r.Health, b.cfg.Services))
		rt.load.Store(r.Load)
		rt.ejected.Store(r.Ejected)
		rt.failStreak.Store(r.FailStreak)
		n++
	}
	if n > 0 {
		b.rebuildLocked()
	}
	b.mu.Unlock()
	if n > 0 {
		b.roundDone.Store(true)
		b.events.Add("restored", fmt.Sprintf("state of %d backends restored from the previous process", n))
	}
	return n
}

// restoredHealth is saved as a restored health: marked Restored, with the reports of the
// services declared now (the others join Ignored); a backend that is not ready keeps none.
// It is pure.
func restoredHealth(saved Health, declared map[string]configs.Service) *Health {
	h := &Health{Ready: saved.Ready, Reason: saved.Reason, Checked: saved.Checked, ReadySince: saved.ReadySince, Restored: true}
	if !saved.Ready {
		return h
	}
	h.Ignored = slices.Clone(saved.Ignored)
	for _, r := range saved.Reports {
		if _, ok := declared[r.Service]; ok {
			h.Reports = append(h.Reports, r)
		} else if !slices.Contains(h.Ignored, r.Service) {
			h.Ignored = append(h.Ignored, r.Service)
		}
	}
	return h
}
