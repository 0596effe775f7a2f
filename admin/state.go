package admin

import (
	"os"
	"time"

	"pollbal/balancer"
	"pollbal/warning"
)

// State is GET /api/state and what the status page shows: the balancer's state, with
// each backend's warned flag and the groups of the last warning round, which the warning
// tracker owns.
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
	Apps     []balancer.AppState  `json:"apps"`
	Pools    []balancer.PoolState `json:"pools"`
	Events   []balancer.Event     `json:"events"`
}

// BackendState is one backend in State: the balancer's view and whether the last warning round
// warned it.
type BackendState struct {
	balancer.BackendState
	Warned bool `json:"warned"`
}

// state assembles State from the balancer and the warning tracker.
func (s *Server) state() State {
	bs := s.bal.State()
	st := State{
		Site: bs.Site, Version: bs.Version, PID: os.Getpid(), Started: s.started.UTC().Format(time.RFC3339), Ready: bs.Ready,
		Backends: make([]BackendState, len(bs.Backends)),
		Groups:   s.warnings.Groups(),
		Apps:     bs.Apps, Pools: bs.Pools, Events: bs.Events,
	}
	for i, b := range bs.Backends {
		st.Backends[i] = BackendState{BackendState: b, Warned: s.warnings.Warned(b.ID)}
	}
	return st
}
