package balancer

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/defaults"
)

// Errors of the override calls. The store of moves checks the pool name and the backend before
// it calls, so only ErrUnknownBackend comes back to it: a reload removed the backend in between.
var (
	ErrUnknownBackend = errors.New("unknown backend")
	ErrInvalidPool    = errors.New("invalid pool name")
)

// Options configure a Balancer.
type Options struct {
	Config     *configs.Config   // validated
	Overrides  map[string]string // backend id → pool, from the admin state file
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Observer   Observer         // optional; hears exhausted pools and fallbacks (the alarms)
	Events     Events           // optional; where ready, not_ready, ejected, readmitted, admin_move and restored are noted
	Now        func() time.Time // optional; default time.Now
}

// Balancer is pollbal's scheduler: it owns the published snapshot, the runtime backends, the
// per-address slots, the admin overrides and the queue, and takes what flows in through its
// ports (ports.go). It is safe for concurrent use.
type Balancer struct {
	log      *slog.Logger
	now      func() time.Time
	observer Observer
	events   Events

	// snap is where the current snapshot is published; the queue reads it too, so it is a cell
	// of its own rather than a field the queue would reach through the Balancer.
	snap *atomic.Pointer[Snapshot]

	mu        sync.Mutex // serialises rebuilds and guards the fields below
	cfg       *configs.Config
	overrides map[string]string
	backends  map[string]*Backend
	slots     map[string]*slot // by configs.AddressKey: the in-flight counts that outlive configurations (slot.go)
	rotations map[[2]string]*rotation
	counters  map[string]*appCounters
	setWork   setWork

	roundDone atomic.Bool
	metrics   *metrics
	queues    *waitQueues // requests waiting for a slot (queue.go)
}

// setWork is what the candidate sets have cost since the balancer was built: the sets made (a
// list built by a rebuild, or a list's set replaced after a health change) and the members read
// to make them; references copied are not counted. It is what holds a health change to its own
// pool's lists in the tests.
type setWork struct {
	sets, members int
}

// New builds a Balancer from a validated configuration and the persisted overrides.
func New(o Options) (*Balancer, error) {
	if o.Config == nil {
		return nil, errors.New("balancer: nil config")
	}
	o.Logger = defaults.Logger(o.Logger)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Registerer = defaults.Registerer(o.Registerer)
	if o.Observer == nil {
		o.Observer = quiet{}
	}
	if o.Events == nil {
		o.Events = quiet{}
	}
	b := &Balancer{
		log:       o.Logger,
		now:       o.Now,
		observer:  o.Observer,
		events:    o.Events,
		snap:      &atomic.Pointer[Snapshot]{},
		overrides: map[string]string{},
		backends:  map[string]*Backend{},
		slots:     map[string]*slot{},
		rotations: map[[2]string]*rotation{},
		counters:  map[string]*appCounters{},
	}
	for id, pool := range o.Overrides {
		if !configs.ValidPoolName(pool) {
			return nil, fmt.Errorf("override for %s: %w %q", id, ErrInvalidPool, pool)
		}
		b.overrides[id] = pool
	}
	m, err := newMetrics(o.Registerer, b)
	if err != nil {
		return nil, err
	}
	b.metrics = m
	if b.queues, err = newWaitQueues(b.snap, o.Now, o.Observer, o.Registerer); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applyConfigLocked(o.Config)
	return b, nil
}

// Snapshot returns the current snapshot; the request path reads it once per request.
func (b *Balancer) Snapshot() *Snapshot { return b.snap.Load() }

// Update applies a new validated configuration. Runtime backends whose id and address are
// unchanged keep their health and failure streaks. Leases are counted per address, whatever the
// configuration: a backend whose capacity changed, whose id was renamed, or that was removed and
// added back still counts the leases taken before the reload, and they are released into the
// same count.
func (b *Balancer) Update(cfg *configs.Config) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applyConfigLocked(cfg)
}

func (b *Balancer) applyConfigLocked(cfg *configs.Config) {
	syncSlots(b.slots, cfg, b.queues)
	next := make(map[string]*Backend, len(cfg.Backends))
	for _, cb := range cfg.Backends {
		if old := b.backends[cb.ID]; old != nil && old.Address == cb.Address {
			next[cb.ID] = old
			continue
		}
		next[cb.ID] = newBackend(cb.ID, cb.Address, b.slots[configs.AddressKey(cb.Address)])
		b.metrics.resolveBackend(next[cb.ID])
	}
	var replaced []*Backend
	for id, old := range b.backends {
		if next[id] != old {
			// Removed, renamed or moved to another address: a request still holding an older
			// snapshot (its retries) must not take its address's slot under the old limit, which
			// the Backend sharing that slot now may be lower than. One that another Backend
			// replaces at the same address gets that Backend's limit once it is computed below.
			old.limit.Store(0)
			replaced = append(replaced, old)
		}
		if next[id] == nil {
			b.metrics.forgetBackend(id)
		}
	}
	b.backends = next
	b.syncAppMetricsLocked(cfg)
	b.cfg = cfg
	for id, pool := range b.overrides {
		if next[id] == nil {
			b.log.Warn("admin override kept for a backend the configuration does not list; it applies again if the id comes back (DELETE /admin/backends/{id}/pool drops it)",
				"backend", id, "pool", pool)
		}
	}
	b.rebuildLocked()
	if len(replaced) > 0 {
		bySlot := make(map[*slot]*Backend, len(next))
		for _, nb := range next {
			bySlot[nb.slot] = nb
		}
		for _, old := range replaced {
			if nb := bySlot[old.slot]; nb != nil {
				old.limit.Store(nb.limit.Load())
			}
		}
	}
}

func (b *Balancer) rebuildLocked() {
	now := b.now()
	next := buildSnapshot(buildInput{
		cfg:       b.cfg,
		overrides: b.overrides,
		backends:  b.backends,
		rotations: b.rotations,
		counters:  b.counters,
		now:       now,
		work:      &b.setWork,
	})
	// Hints: retire the old sets before their backends stop raising them, register the new
	// ones before anyone can pick from them (hints.go).
	if old := b.snap.Load(); old != nil {
		retire(old)
		for _, m := range old.members {
			if b.backends[m.cfg.ID] != m.b {
				m.slot.hints.Store(nil) // removed or replaced: registerAll below restores a slot still listed
			}
		}
	}
	// Limits: the old sets are stale now (no hint relies on their capacities), and the new
	// ones are built with the capacities these limits are computed from (fleet.go).
	storeLimits(next, now)
	registerAll(next)
	b.snap.Store(next)
	b.queues.touch(next)
	b.queues.wake() // capacities or candidates may have changed: waiters that fit now go
}

// Observe applies one check result. Unknown ids are ignored (a reload may have removed the
// backend). Reports for services the config does not declare are dropped, counted and listed
// in the state. When something a scheduler sees changed, the backend joins or leaves the
// candidate sets of its own pool (not a new snapshot, nor a walk over the pool).
func (b *Balancer) Observe(o Observation) {
	snap := b.snap.Load()
	m := snap.byID[o.ID]
	if m == nil {
		return
	}
	rt := m.b
	if o.Address != "" && o.Address != rt.Address {
		return // a check of the address a reload just replaced
	}
	h, change := nextHealth(rt.health.Load(), o, snap.cfg.Services)
	if len(h.Ignored) > 0 {
		b.metrics.ignored.WithLabelValues(o.ID).Add(float64(len(h.Ignored)))
	}
	if o.Reason == "" {
		b.readmit(rt)
	}
	b.applyHealth(rt, h, change)
	b.observeLoad(rt, o) // after applyHealth's unlock: it may take the mutex itself
}

// readmit ends rt's failure streak after a good check, and its ejection if it was ejected.
func (b *Balancer) readmit(rt *Backend) {
	if !rt.ejected.Load() && rt.failStreak.Load() == 0 {
		return
	}
	rt.failStreak.Store(0)
	if rt.ejected.CompareAndSwap(true, false) {
		b.events.Add("readmitted", fmt.Sprintf("backend %s back in scheduling after a good check", rt.ID))
		b.log.Info("backend readmitted after a good check", "backend", rt.ID)
	}
}

// applyHealth publishes h as rt's health. A change nothing schedules on is stored without a
// lock or a rebuild; a visible one is stored under the mutex, moves rt in the candidate sets of
// its pool and fires the events and the log line the change calls for. A Backend a reload
// replaced meanwhile is left alone.
func (b *Balancer) applyHealth(rt *Backend, h *Health, c healthChange) {
	if !c.Visible {
		rt.health.Store(h)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.backends[rt.ID] != rt { // replaced by a reload meanwhile
		return
	}
	rt.health.Store(h)
	// Only the candidate sets of this backend's pool depend on its health, and of those only
	// the ones whose group it joins or leaves; under b.mu no rebuild can swap the snapshot
	// meanwhile.
	cur := b.snap.Load()
	if cm := cur.byID[rt.ID]; cm != nil && cm.b == rt {
		regroup(cur, cm, h, &b.setWork)
		b.queues.wake() // a backend that became ready may serve waiters
	}
	if c.ReadyChanged {
		if h.Ready {
			b.events.Add("ready", fmt.Sprintf("backend %s is ready", rt.ID))
		} else {
			b.events.Add("not_ready", fmt.Sprintf("backend %s is not ready: %s", rt.ID, h.Reason))
		}
	}
	if c.NewIgnored {
		b.log.Warn("backend reports services the config does not declare; dropped", "backend", rt.ID, "services", h.Ignored)
	}
}

// RoundDone marks the first check round as finished (readiness of the process).
// Once per interval it also drops load reports that have grown too old.
func (b *Balancer) RoundDone() {
	b.roundDone.Store(true)
	b.expireLoads()
}

// Ready reports whether the first check round has finished.
func (b *Balancer) Ready() bool { return b.roundDone.Load() }

// SetOverride moves a backend to pool; it takes effect for the next request. The caller persists
// it first.
func (b *Balancer) SetOverride(id, pool string) error {
	if !configs.ValidPoolName(pool) {
		return fmt.Errorf("%w %q", ErrInvalidPool, pool)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.backends[id] == nil {
		return fmt.Errorf("%w %q", ErrUnknownBackend, id)
	}
	b.overrides[id] = pool
	b.rebuildLocked()
	b.events.Add("admin_move", fmt.Sprintf("backend %s moved to pool %s", id, pool))
	return nil
}

// ClearOverride drops a backend's override (back to what the config says). An override kept
// for a backend that a reload removed can be dropped too.
func (b *Balancer) ClearOverride(id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.overrides[id]; !ok {
		if b.backends[id] == nil {
			return fmt.Errorf("%w %q", ErrUnknownBackend, id)
		}
		return nil
	}
	delete(b.overrides, id)
	b.rebuildLocked()
	b.events.Add("admin_move", fmt.Sprintf("backend %s returned to its configured pool", id))
	return nil
}

// Overrides returns a copy of the admin overrides.
func (b *Balancer) Overrides() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]string, len(b.overrides))
	for k, v := range b.overrides {
		out[k] = v
	}
	return out
}

// Known reports whether id is a configured backend.
func (b *Balancer) Known(id string) bool {
	_, ok := b.Snapshot().byID[id]
	return ok
}
