package balancer

import (
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

// State is the JSON document of GET /api/state.
type State struct {
	Site     string         `json:"site"`
	Version  string         `json:"version"`
	Ready    bool           `json:"ready"`
	Backends []BackendState `json:"backends"`
	Apps     []AppState     `json:"apps"`
	Pools    []PoolState    `json:"pools"`
	Events   []Event        `json:"events"`
}

// BackendState is one backend in State.
type BackendState struct {
	ID         string            `json:"id"`
	Address    string            `json:"address"`
	Pool       string            `json:"pool"`
	PoolSource string            `json:"pool_source"`
	Ready      bool              `json:"ready"`
	Reason     string            `json:"reason"`
	Reports    []protocol.Report `json:"reports"`
	Ignored    []string          `json:"ignored_services,omitempty"`
	Capacity   int               `json:"capacity"`
	InFlight   int64             `json:"in_flight"`
	// Limit is what this instance may have in flight on the backend now: its share of the
	// capacity for the fleet, slow start applied.
	Limit int64 `json:"limit"`
	// Load is the backend's fresh load report; nil when it has none (or it is too old).
	Load      *LoadState `json:"load"`
	Ejected   bool       `json:"ejected"`
	LastCheck string     `json:"last_check"`
	// Restored: the readiness shown came from a previous process's state, not from a check
	// of this one yet.
	Restored bool `json:"restored"`
}

// LoadState is a backend's load report in State.
type LoadState struct {
	InFlight int64 `json:"in_flight"` // the backend's own count, from every balancer and client
	Capacity int64 `json:"capacity"`  // 0 when it reported none
	AgeMs    int64 `json:"age_ms"`    // how long ago the answer that carried it arrived
}

// AppState is one app in State.
type AppState struct {
	Name                   string   `json:"name"`
	Hosts                  []string `json:"hosts"`
	Service                string   `json:"service"`
	Pool                   string   `json:"pool"`
	Resolution             string   `json:"resolution"`
	AllowFallbackToDefault bool     `json:"allow_fallback_to_default"`
	Candidates             int      `json:"candidates"`
	FallbackCandidates     int      `json:"fallback_candidates"`
}

// PoolState is one node pool in State and in GET /admin/pools.
type PoolState struct {
	Name      string   `json:"name"`
	Backends  []string `json:"backends"`
	Apps      []string `json:"apps"`
	Scheduled bool     `json:"scheduled"`
	Queued    int      `json:"queued"` // requests waiting for a slot of the pool now (proxy.queue_timeout)
}

// State computes the quiet view: the same candidate predicate as scheduling, but it never takes
// a lease, raises an alarm or records a fallback.
func (b *Balancer) State() State {
	s := b.Snapshot()
	now := b.now()
	st := State{
		Site:     s.cfg.Site,
		Version:  b.version,
		Ready:    b.Ready(),
		Backends: make([]BackendState, 0, len(s.members)),
		Apps:     make([]AppState, 0, len(s.apps)),
		Pools:    b.pools(s),
		Events:   b.events.List(),
	}
	for _, m := range s.members {
		h := m.b.Health()
		bs := BackendState{
			ID: m.cfg.ID, Address: m.cfg.Address, Pool: m.pool, PoolSource: m.source,
			Ready: h.Ready, Reason: h.Reason, Reports: h.Reports, Ignored: h.Ignored,
			Capacity: int(m.capacity), InFlight: m.b.InFlight(), Ejected: m.b.Ejected(),
			Limit: s.limit(m, h, now), Restored: h.Restored,
		}
		if l := m.b.Load(); h.Ready && l != nil && !reportStale(l.At, now, s.cfg.Poll.Interval) {
			bs.Load = &LoadState{InFlight: l.InFlight, Capacity: l.Capacity, AgeMs: max(now.Sub(l.At).Milliseconds(), 0)}
		}
		if bs.Reports == nil {
			bs.Reports = []protocol.Report{}
		}
		if !h.Checked.IsZero() {
			bs.LastCheck = h.Checked.UTC().Format(time.RFC3339)
		}
		st.Backends = append(st.Backends, bs)
	}
	for _, a := range s.apps {
		as := AppState{
			Name: a.Name, Hosts: a.Hosts, Service: a.Service, Pool: a.Pool, Resolution: a.Resolution,
			AllowFallbackToDefault: a.AllowFallback, Candidates: s.candidates(a.primary, now),
		}
		if a.fallback != nil {
			as.FallbackCandidates = s.candidates(a.fallback, now)
		}
		st.Apps = append(st.Apps, as)
	}
	return st
}

// Pools returns every node pool: default first, unassigned last, the rest by name.
func (b *Balancer) Pools() []PoolState { return b.pools(b.Snapshot()) }

func (b *Balancer) pools(s *Snapshot) []PoolState {
	names := s.poolNames()
	apps := map[string][]string{}
	fallback := false // some app may fall back to default
	for _, a := range s.apps {
		apps[a.Pool] = append(apps[a.Pool], a.Name)
		fallback = fallback || a.fallback != nil
	}
	out := make([]PoolState, 0, len(names))
	for _, n := range names {
		// Scheduled: some app resolves to the pool (or, for default, may fall back to it).
		scheduled := n != configs.PoolUnassigned && (len(apps[n]) > 0 || (n == configs.PoolDefault && fallback))
		p := PoolState{Name: n, Backends: make([]string, 0, len(s.pooled[n])), Apps: apps[n], Scheduled: scheduled, Queued: b.QueueLength(n)}
		for _, m := range s.pooled[n] { // in id order
			p.Backends = append(p.Backends, m.cfg.ID)
		}
		if p.Apps == nil {
			p.Apps = []string{}
		}
		out = append(out, p)
	}
	return out
}
