package admin

import (
	"os"
	"time"

	"pollbal/balancer"
	"pollbal/internal/alarms"
	"pollbal/protocol"
	"pollbal/warning"
)

// State is GET /api/state and what the status page shows: the balancer's snapshot as its quiet
// read path gives it, each backend's warned flag and the groups of the last warning round,
// which the warning tracker owns, and the recent events.
type State struct {
	Site    string `json:"site"`
	Version string `json:"version"`
	// PID is the serving process and Started when it started (RFC 3339): a binary upgrade
	// shows as a new pid.
	PID      int                  `json:"pid"`
	Started  string               `json:"started"`
	Ready    bool                 `json:"ready"`
	Backends []BackendState       `json:"backends"`
	Groups   []warning.GroupState `json:"groups"`
	Apps     []AppState           `json:"apps"`
	Pools    []PoolState          `json:"pools"`
	Events   []alarms.Event       `json:"events"`
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
	Warned   bool `json:"warned"` // the last warning round warned it
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

// state assembles State from one balancer snapshot read at one moment, the warning tracker and
// the events.
func (s *Server) state() State {
	snap, now := s.bal.Snapshot(), time.Now()
	members := snap.Members(now)
	apps := snap.Apps()
	st := State{
		Site:     snap.Config().Site,
		Version:  s.version,
		PID:      os.Getpid(),
		Started:  s.started.UTC().Format(time.RFC3339),
		Ready:    s.bal.Ready(),
		Backends: make([]BackendState, 0, len(members)),
		Groups:   s.warnings.Groups(),
		Apps:     make([]AppState, 0, len(apps)),
		Pools:    s.pools(snap),
		Events:   s.events.List(),
	}
	for _, m := range members {
		st.Backends = append(st.Backends, backendState(m, now, s.warnings.Warned(m.Backend.ID)))
	}
	for _, a := range apps {
		own, fallback := snap.Candidates(a, now)
		st.Apps = append(st.Apps, AppState{
			Name: a.Name, Hosts: a.Hosts, Service: a.Service, Pool: a.Pool, Resolution: a.Resolution,
			AllowFallbackToDefault: a.AllowFallback, Candidates: own, FallbackCandidates: fallback,
		})
	}
	return st
}

// backendState is m as State shows it at now.
func backendState(m balancer.Member, now time.Time, warned bool) BackendState {
	b, h := m.Backend, m.Backend.Health()
	bs := BackendState{
		ID: b.ID, Address: b.Address, Pool: m.Pool, PoolSource: m.PoolSource,
		Ready: h.Ready, Reason: h.Reason, Reports: h.Reports, Ignored: h.Ignored,
		Capacity: int(m.Capacity), InFlight: b.InFlight(), Limit: m.Limit, Ejected: b.Ejected(),
		Restored: h.Restored, Warned: warned,
	}
	if l := m.Load; l != nil {
		bs.Load = &LoadState{InFlight: l.InFlight, Capacity: l.Capacity, AgeMs: max(now.Sub(l.At).Milliseconds(), 0)}
	}
	if bs.Reports == nil {
		bs.Reports = []protocol.Report{}
	}
	if !h.Checked.IsZero() {
		bs.LastCheck = h.Checked.UTC().Format(time.RFC3339)
	}
	return bs
}

// pools is every node pool of snap with the requests queued for it now.
func (s *Server) pools(snap *balancer.Snapshot) []PoolState {
	ps := snap.Pools()
	out := make([]PoolState, len(ps))
	for i, p := range ps {
		out[i] = PoolState{Name: p.Name, Backends: p.Backends, Apps: p.Apps, Scheduled: p.Scheduled, Queued: s.bal.QueueLength(p.Name)}
	}
	return out
}
