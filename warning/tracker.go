package warning

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/protocol"
)

// Members is the one thing a Tracker reads from the balancer: the ready backends of the current
// configuration, each in the node pool it belongs to now. It is written with shared types only,
// so that the balancer satisfies it without importing this package.
type Members interface {
	// EachReady calls fn once per ready backend with its address, its node pool and its reports
	// of the services the configuration declares. fn must not modify reports.
	EachReady(fn func(id, address, pool string, reports []protocol.Report))
}

// Events records what the status page lists: warning_started and warning_stopped.
type Events interface {
	Add(kind, message string)
}

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

// TrackerOptions configures a Tracker.
type TrackerOptions struct {
	Members Members         // required
	Events  Events          // nil: no events
	Config  *configs.Config // validated: the services' policies and the backends
	// SenderOptions configure the Tracker's Sender; their Registerer also receives
	// pollbal_group_serving and pollbal_group_leaving.
	SenderOptions
}

// Tracker owns the warning round: after each check round it reads the ready members,
// decides the groups with Decide, keeps the groups and who is warned for the state API and the
// metrics, records an event when a backend starts or stops being warned, and hands one POST per
// warned backend and group to its Sender. It is safe for concurrent use and must not be copied.
type Tracker struct {
	members Members
	events  Events
	sender  *Sender
	serving *prometheus.Desc
	leaving *prometheus.Desc

	mu       sync.Mutex // serialises rounds and reloads; guards the fields below
	policies map[string]Policy
	known    map[string]bool // the configured backend ids
	groups   []GroupState
	warned   map[string]bool
}

// NewTracker builds a Tracker and its Sender, and registers their metrics with o.Registerer.
func NewTracker(o TrackerOptions) (*Tracker, error) {
	if o.Members == nil {
		return nil, fmt.Errorf("new warning tracker: nil members")
	}
	if o.Config == nil {
		return nil, fmt.Errorf("new warning tracker: nil config")
	}
	sender, err := NewSender(o.SenderOptions)
	if err != nil {
		return nil, err
	}
	t := &Tracker{
		members: o.Members,
		events:  o.Events,
		sender:  sender,
		serving: prometheus.NewDesc("pollbal_group_serving", "Ready backends reporting serving in the warning group.", []string{"pool", "service", "version"}, nil),
		leaving: prometheus.NewDesc("pollbal_group_leaving", "Ready backends reporting leaving in the warning group.", []string{"pool", "service", "version"}, nil),
		warned:  map[string]bool{},
	}
	t.configure(o.Config)
	sender.Retain(t.known)
	if o.Registerer != nil {
		if err := o.Registerer.Register(t); err != nil {
			return nil, fmt.Errorf("new warning tracker: register metrics: %w", err)
		}
	}
	return t, nil
}

// Update applies a reloaded configuration: the services' policies, the backends, the timeout
// and the secret. A backend the configuration no longer lists is forgotten at once: its warned
// flag, its delivery state and its error series. Call it before the balancer takes the new
// configuration, so that a round in between never warns a backend that is being removed.
func (t *Tracker) Update(cfg *configs.Config, secret []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.configure(cfg)
	for id := range t.warned {
		if !t.known[id] {
			delete(t.warned, id)
		}
	}
	t.sender.Update(cfg.Warning.Timeout, secret)
	t.sender.Retain(t.known)
}

func (t *Tracker) configure(cfg *configs.Config) {
	t.policies = make(map[string]Policy, len(cfg.Services))
	for name, svc := range cfg.Services {
		t.policies[name] = Policy{Threshold: svc.WarningThreshold, Scope: svc.WarningScope}
	}
	t.known = make(map[string]bool, len(cfg.Backends))
	for _, b := range cfg.Backends {
		t.known[b.ID] = true
	}
}

// Round runs one warning round: the ready members, grouped and decided, become the groups shown
// and the POSTs sent. It never waits for a POST.
func (t *Tracker) Round() {
	t.mu.Lock()
	var members []Member
	address := map[string]string{}
	t.members.EachReady(func(id, addr, pool string, reports []protocol.Report) {
		if !t.known[id] {
			return // the balancer took a configuration this Tracker has not seen yet
		}
		address[id] = addr
		for _, r := range reports {
			members = append(members, Member{Backend: id, Pool: pool, Report: r})
		}
	})
	groups := Decide(members, t.policies)
	states := make([]GroupState, 0, len(groups))
	warned := map[string]bool{}
	var targets []Target
	for _, g := range groups {
		states = append(states, GroupState{
			Pool: g.Pool, Service: g.Service, Version: g.Version,
			Serving: len(g.Serving), Leaving: len(g.Leaving), Threshold: g.Threshold,
			Warned: append([]string{}, g.Warned...), // [] rather than null in the state API
		})
		for _, id := range g.Warned {
			warned[id] = true
			targets = append(targets, Target{Backend: id, Address: address[id], Group: g})
		}
	}
	started, stopped := changes(t.warned, warned)
	t.groups, t.warned = states, warned
	t.mu.Unlock()

	if t.events != nil && len(started) > 0 {
		t.events.Add("warning_started", fmt.Sprintf("warning %s: needed to keep the threshold", strings.Join(started, ", ")))
	}
	if t.events != nil && len(stopped) > 0 {
		t.events.Add("warning_stopped", fmt.Sprintf("no longer warning %s", strings.Join(stopped, ", ")))
	}
	t.sender.Expect(groups)
	t.sender.Send(targets)
}

// changes lists, sorted, the ids warned now but not before and those warned before but not now.
func changes(before, now map[string]bool) (started, stopped []string) {
	for id := range now {
		if !before[id] {
			started = append(started, id)
		}
	}
	for id := range before {
		if !now[id] {
			stopped = append(stopped, id)
		}
	}
	slices.Sort(started)
	slices.Sort(stopped)
	return started, stopped
}

// Groups returns the groups decided in the last round, sorted by pool, service and version;
// never nil.
func (t *Tracker) Groups() []GroupState {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]GroupState, len(t.groups))
	copy(out, t.groups)
	return out
}

// Warned reports whether the last round warned backend id.
func (t *Tracker) Warned(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.warned[id]
}

// Close stops sending and waits for the POSTs in flight (Sender.Close). It is idempotent.
func (t *Tracker) Close() { t.sender.Close() }

// Describe implements prometheus.Collector.
func (t *Tracker) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.serving
	ch <- t.leaving
}

// Collect implements prometheus.Collector: one serving and one leaving gauge per group of the
// last round.
func (t *Tracker) Collect(ch chan<- prometheus.Metric) {
	for _, g := range t.Groups() {
		ch <- prometheus.MustNewConstMetric(t.serving, prometheus.GaugeValue, float64(g.Serving), g.Pool, g.Service, g.Version)
		ch <- prometheus.MustNewConstMetric(t.leaving, prometheus.GaugeValue, float64(g.Leaving), g.Pool, g.Service, g.Version)
	}
}
