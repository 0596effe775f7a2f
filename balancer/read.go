package balancer

import (
	"time"

	"pollbal/configs"
)

// The quiet read path: what the status page, /api/state and the admin API show. It reads a
// snapshot and the live cells under it with the same candidate predicate as scheduling, but it
// never takes a lease, raises an alarm or records a fallback. Every value it returns is a copy
// or immutable.

// Member is one backend of a snapshot as a reader sees it at one moment.
type Member struct {
	Backend    *Backend // its runtime state: health, in-flight, ejection
	Pool       string
	PoolSource string // admin, config, owner or default
	// Capacity is what the snapshot schedules the backend with: its configured capacity, or
	// the one a fresh load report gave.
	Capacity int64
	// Limit is what this instance may have in flight on the backend at that moment: its share
	// of the capacity for the fleet, slow start applied.
	Limit int64
	// Load is the backend's load report while it is ready and the report fresh; nil otherwise.
	Load *Load
}

// Members returns every backend of s as it is at now, in configuration order.
func (s *Snapshot) Members(now time.Time) []Member {
	out := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		h := m.b.Health()
		mv := Member{Backend: m.b, Pool: m.pool, PoolSource: m.source, Capacity: m.capacity, Limit: s.limit(m, h, now)}
		if l := m.b.Load(); h.Ready && l != nil && !reportStale(l.At, now, s.cfg.Poll.Interval) {
			mv.Load = l
		}
		out = append(out, mv)
	}
	return out
}

// Candidates counts, at now, the available candidates with a free slot of app's pool and of its
// fallback (0 when it may not fall back).
func (s *Snapshot) Candidates(app *App, now time.Time) (own, fallback int) {
	return s.candidates(app.primary, now), s.candidates(app.fallback, now)
}

// Pool is one node pool of a snapshot.
type Pool struct {
	Name     string
	Backends []string // in id order
	Apps     []string // the apps that resolve to it, in configuration order
	// Scheduled: some app resolves to the pool (or, for default, may fall back to it).
	Scheduled bool
}

// Pools returns every node pool of s: default first, unassigned last, the rest by name.
func (s *Snapshot) Pools() []Pool {
	names := s.poolNames()
	apps := map[string][]string{}
	fallback := false // some app may fall back to default
	for _, a := range s.apps {
		apps[a.Pool] = append(apps[a.Pool], a.Name)
		fallback = fallback || a.fallback != nil
	}
	out := make([]Pool, 0, len(names))
	for _, n := range names {
		scheduled := n != configs.PoolUnassigned && (len(apps[n]) > 0 || (n == configs.PoolDefault && fallback))
		p := Pool{Name: n, Backends: make([]string, 0, len(s.pooled[n])), Apps: apps[n], Scheduled: scheduled}
		for _, m := range s.pooled[n] {
			p.Backends = append(p.Backends, m.cfg.ID)
		}
		if p.Apps == nil {
			p.Apps = []string{}
		}
		out = append(out, p)
	}
	return out
}
