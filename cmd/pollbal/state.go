package main

import (
	"time"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/runstate"
	"pollbal/poller"
	"pollbal/protocol"
)

// newStateWriter prepares state_dir (made when missing, temporary files of an interrupted
// write removed) and returns the writer of the runtime state; nil when state_dir is "".
func (s *server) newStateWriter(cfg *configs.Config) (*runstate.Writer, error) {
	path := cfg.RuntimeStatePath()
	if path == "" {
		return nil, nil
	}
	if err := runstate.Prepare(path); err != nil {
		return nil, err
	}
	return runstate.NewWriter(runstate.WriterOptions{
		Path: path, Site: cfg.Site, Pollbal: version, Backends: s.captureState, Logger: s.log,
	}), nil
}

// captureState is the runtime state of every configured backend, for the state file.
func (s *server) captureState() []runstate.Backend {
	rts := s.bal.Runtime()
	out := make([]runstate.Backend, len(rts))
	for i, rt := range rts {
		h := rt.Health
		b := runstate.Backend{
			Address: rt.Address, ID: rt.ID, Ready: h.Ready, Reason: h.Reason, Reports: h.Reports,
			Ignored: h.Ignored, Checked: h.Checked, ReadySince: h.ReadySince,
			Ejected: rt.Ejected, FailStreak: rt.FailStreak, Warned: s.warn.Warned(rt.ID),
		}
		if h.Ready && b.Reports == nil {
			b.Reports = []protocol.Report{} // ready in no service, which null (not ready) is not
		}
		if l := rt.Load; l != nil {
			b.Load = &runstate.Load{
				InFlight: l.InFlight, Capacity: l.Capacity, At: l.At, MineThen: l.MineThen,
				LimitThen: l.LimitThen, PrevOthers: l.PrevOthers, PrevAt: l.PrevAt,
			}
		}
		out[i] = b
	}
	return out
}

// restoreState restores the runtime state a previous process left in state_dir, if Decide
// allows it, into the balancer (readiness, reports, load reports, ejections, slow start), the
// poller (ready backends stay ready until fall checks fail) and the warning tracker (who was
// warned; one warning round runs at once, so that the warnings go on without a gap). It runs
// before the poller and before any request is served, and logs what it did or why not.
func (s *server) restoreState() {
	if s.state == nil {
		return
	}
	cfg := s.cfg
	path := cfg.RuntimeStatePath()
	f, err := runstate.Read(path)
	configured := make(map[string]bool, len(cfg.Backends))
	for _, b := range cfg.Backends {
		configured[configs.AddressKey(b.Address)] = true
	}
	d := runstate.Decide(runstate.Input{
		File: f, ReadErr: err, Site: cfg.Site, Now: time.Now(), MaxAge: cfg.Poll.RestoreMaxAge,
		Configured: configured, Key: configs.AddressKey,
	})
	if !d.Restore {
		if d.Why == "" {
			s.log.Info("no runtime state to restore: starting from scratch", "path", path)
		} else {
			s.log.Warn("runtime state ignored: starting from scratch", "path", path, "why", d.Why)
		}
		return
	}
	saved := make([]balancer.Runtime, 0, len(d.Backends))
	for _, b := range d.Backends {
		saved = append(saved, toRuntime(b))
	}
	n := s.bal.Restore(saved)
	s.state.Restored(f.Written)

	var seeds []poller.Result
	var warned []string
	for _, rt := range s.bal.Runtime() {
		if !rt.Health.Restored {
			continue
		}
		if d.Backends[configs.AddressKey(rt.Address)].Warned {
			warned = append(warned, rt.ID)
		}
		if rt.Health.Ready {
			r := poller.Result{ID: rt.ID, Address: rt.Address, Ready: true, Reports: rt.Health.Reports, Checked: rt.Health.Checked}
			if rt.Load != nil {
				r.Load = &rt.Load.Load
			}
			seeds = append(seeds, r)
		}
	}
	s.poll.Seed(seeds)
	s.warn.Seed(warned)
	s.warn.Round()
	s.log.Info("runtime state restored", "path", path, "age", d.Age.Round(time.Millisecond), "written_by", f.PID,
		"backends", n, "ready", len(seeds), "warned", len(warned), "not_configured", d.Dropped)
}

// toRuntime is a state file entry as the balancer restores it.
func toRuntime(b runstate.Backend) balancer.Runtime {
	rt := balancer.Runtime{
		ID: b.ID, Address: b.Address, Ejected: b.Ejected, FailStreak: b.FailStreak,
		Health: balancer.Health{
			Ready: b.Ready, Reason: b.Reason, Reports: b.Reports, Ignored: b.Ignored,
			Checked: b.Checked, ReadySince: b.ReadySince,
		},
	}
	if l := b.Load; l != nil {
		rt.Load = &balancer.Load{
			Load:     protocol.Load{InFlight: l.InFlight, Capacity: l.Capacity, At: l.At},
			MineThen: l.MineThen, LimitThen: l.LimitThen, PrevOthers: l.PrevOthers, PrevAt: l.PrevAt,
		}
	}
	return rt
}
