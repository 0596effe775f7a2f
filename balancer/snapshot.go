package balancer

import (
	"sort"
	"sync/atomic"
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

// member is one backend as it appears in a snapshot.
type member struct {
	b        *Backend
	slot     *slot // b.slot, one load closer to the pick's scan
	cfg      configs.Backend
	capacity int64 // the configured capacity, or the one a fresh load report gave (fleet.go)
	pool     string
	source   string
}

// candList is the candidate list of one (pool, service). Its pool members are fixed for the
// snapshot; which of them are ready and report the service (serving or leaving) is a candSet
// swapped atomically when one of their health changes, so a check result costs a refresh of
// its own pool's lists rather than a whole new snapshot.
type candList struct {
	pool, service string
	pooled        []*member // every member of the pool, in id order
	cur           atomic.Pointer[candSet]
	rot           *rotation
}

// candSet is an immutable ranking input: serving members first, then leaving ones, each in id
// order, with the block hints a pick uses to skip members that cannot win (hints.go). Once a
// newer set replaces it, it is marked stale and its hints are no longer raised by releases, so
// picks on it (a request still holding an older snapshot) scan it linearly.
type candSet struct {
	groups [2]rankGroup // serving, leaving
	maxCap int64        // largest capacity in the set: a member with that much spare cannot be beaten
	stale  atomic.Bool
}

// build computes the list's candSet from the members' live health; it publishes nothing.
func (l *candList) build() *candSet {
	set := &candSet{}
	var serving, leaving []*member
	if l.pool != configs.PoolUnassigned {
		for _, m := range l.pooled {
			h := m.b.Health()
			if !h.Ready {
				continue
			}
			for _, r := range h.Reports {
				if r.Service != l.service {
					continue
				}
				if r.Status == protocol.Leaving {
					leaving = append(leaving, m)
				} else {
					serving = append(serving, m)
				}
				if m.capacity > set.maxCap {
					set.maxCap = m.capacity
				}
			}
		}
	}
	set.groups = [2]rankGroup{newRankGroup(serving), newRankGroup(leaving)}
	return set
}

// App is one configured app as resolved in a snapshot. It is immutable; callers may keep it for
// the duration of one request.
type App struct {
	Name          string
	Service       string
	Pool          string
	Resolution    string // explicit, owner or default
	AllowFallback bool
	Hosts         []string

	primary  *candList
	fallback *candList // nil when fallback is not allowed or the app already resolves to default
	counters *appCounters
	requests *RequestMetrics
}

// Snapshot is an immutable view of configuration, ownership and health. It is safe for
// concurrent use; it is replaced wholesale, never modified.
type Snapshot struct {
	cfg       *configs.Config
	members   []*member // config order
	byID      map[string]*member
	apps      []*App
	router    router
	lists     map[[2]string]*candList
	byPool    map[string][]*candList // the lists of each pool, refreshed on a member's health change
	slowStart time.Duration
	tieID     bool
	bal       *Balancer
	queue     *waitQueues // the balancer's queues when proxy.queue_timeout is on, else nil
}

// Config returns the configuration the snapshot was built from.
func (s *Snapshot) Config() *configs.Config { return s.cfg }

// Apps returns the resolved apps in config order.
func (s *Snapshot) Apps() []*App { return s.apps }

// Backends returns the runtime backends in config order.
func (s *Snapshot) Backends() []*Backend {
	out := make([]*Backend, len(s.members))
	for i, m := range s.members {
		out[i] = m.b
	}
	return out
}

// PoolOf returns the node pool and its source for a backend id.
func (s *Snapshot) PoolOf(id string) (pool, source string, ok bool) {
	m := s.byID[id]
	if m == nil {
		return "", "", false
	}
	return m.pool, m.source, true
}

// rotation is the starting point of the rotate tie-break; it is shared by the lists of one
// (pool, service) across snapshots so a rebuild does not reset it. Every pick writes it, so it
// fills a cache line of its own rather than sharing one with what other picks read.
type rotation struct {
	n atomic.Uint32
	_ [cacheLine - 4]byte
}

// buildInput is what a snapshot is made of.
type buildInput struct {
	cfg       *configs.Config
	overrides map[string]string
	backends  map[string]*Backend // by id, already matching cfg
	rotations map[[2]string]*rotation
	counters  map[string]*appCounters
	requests  map[string]*RequestMetrics
	bal       *Balancer
	now       time.Time // for the age of load reports
}

// resolveBackendPool applies the ownership order: admin override, config pool, pool-<owner>, default.
func resolveBackendPool(b configs.Backend, overrides map[string]string) (pool, source string) {
	if p, ok := overrides[b.ID]; ok {
		return p, configs.PoolSourceAdmin
	}
	return configs.BackendPool(b)
}

func buildSnapshot(in buildInput) *Snapshot {
	cfg := in.cfg
	s := &Snapshot{
		cfg:       cfg,
		byID:      make(map[string]*member, len(cfg.Backends)),
		lists:     make(map[[2]string]*candList),
		slowStart: cfg.Proxy.SlowStart,
		tieID:     cfg.Proxy.TieBreak == configs.TieBreakID,
		bal:       in.bal,
	}
	for _, cb := range cfg.Backends {
		pool, source := resolveBackendPool(cb, in.overrides)
		rt := in.backends[cb.ID]
		m := &member{
			b:        rt,
			slot:     rt.slot,
			cfg:      cb,
			capacity: s.decide(cb, rt.load.Load(), in.now).Capacity,
			pool:     pool,
			source:   source,
		}
		s.members = append(s.members, m)
		s.byID[cb.ID] = m
	}
	// Candidate lists for every (pool, service) an app may use: its own pool and, where allowed,
	// default. The predicate re-checks the atomics at request time.
	for _, ca := range cfg.Apps {
		pool, resolution, allow := configs.AppPool(ca)
		a := &App{
			Name:          ca.Name,
			Service:       ca.Service,
			Pool:          pool,
			Resolution:    resolution,
			AllowFallback: allow,
			Hosts:         ca.Hosts,
			counters:      in.counters[ca.Name],
			requests:      in.requests[ca.Name],
		}
		a.primary = s.list(pool, ca.Service, in.rotations)
		if allow && pool != configs.PoolDefault {
			a.fallback = s.list(configs.PoolDefault, ca.Service, in.rotations)
		}
		s.apps = append(s.apps, a)
	}
	s.router = newRouter(s.apps)
	return s
}

// list returns (building once) the candidate list of (pool, service).
func (s *Snapshot) list(pool, service string, rotations map[[2]string]*rotation) *candList {
	key := [2]string{pool, service}
	if l := s.lists[key]; l != nil {
		return l
	}
	l := &candList{pool: pool, service: service, rot: rotations[key]}
	if l.rot == nil {
		l.rot = &rotation{}
		rotations[key] = l.rot
	}
	for _, m := range s.members {
		if m.pool == pool {
			l.pooled = append(l.pooled, m)
		}
	}
	sort.Slice(l.pooled, func(i, j int) bool { return l.pooled[i].cfg.ID < l.pooled[j].cfg.ID })
	l.cur.Store(l.build())
	s.lists[key] = l
	if s.byPool == nil {
		s.byPool = map[string][]*candList{}
	}
	s.byPool[pool] = append(s.byPool[pool], l)
	return l
}

// refreshPool rebuilds the candidate sets of pool's lists after a member's health changed. The
// caller holds the balancer's mutex.
func (s *Snapshot) refreshPool(pool string) {
	lists := s.byPool[pool]
	if len(lists) == 0 {
		return
	}
	next := make([]*candSet, len(lists))
	for i, l := range lists {
		next[i] = l.build()
	}
	for _, l := range lists {
		l.cur.Load().stale.Store(true)
	}
	registerHints(lists[0].pooled, next)
	for i, l := range lists {
		l.cur.Store(next[i])
	}
}

// retire marks every candidate set of a snapshot that a rebuild replaced as stale. The caller
// holds the balancer's mutex.
func (s *Snapshot) retire() {
	for _, l := range s.lists {
		l.cur.Load().stale.Store(true)
	}
}

// registerAll registers the hints of every candidate set of a snapshot that is about to be
// published; members of pools without lists raise none. The caller holds the balancer's mutex.
func (s *Snapshot) registerAll() {
	for _, m := range s.members {
		if len(s.byPool[m.pool]) == 0 {
			m.slot.hints.Store(nil)
		}
	}
	for _, lists := range s.byPool {
		sets := make([]*candSet, len(lists))
		for i, l := range lists {
			sets[i] = l.cur.Load()
		}
		registerHints(lists[0].pooled, sets)
	}
}

// Route returns the app whose host patterns match host most specifically (exact, then the
// longest wildcard, then "*"), ignoring any port; nil when no app matches.
func (s *Snapshot) Route(host []byte) *App { return s.router.match(host) }

// AppByName returns the named app, or nil.
func (s *Snapshot) AppByName(name string) *App {
	for _, a := range s.apps {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// poolNames lists every pool that exists in the snapshot: default first, unassigned last, the
// rest by name.
func (s *Snapshot) poolNames() []string {
	set := map[string]bool{}
	for _, m := range s.members {
		set[m.pool] = true
	}
	for _, a := range s.apps {
		set[a.Pool] = true
	}
	delete(set, configs.PoolDefault)
	delete(set, configs.PoolUnassigned)
	names := make([]string, 0, len(set)+2)
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return append(append([]string{configs.PoolDefault}, names...), configs.PoolUnassigned)
}

// scheduled reports whether some app resolves to pool (or, for default, may fall back to it).
func (s *Snapshot) scheduled(pool string) bool {
	if pool == configs.PoolUnassigned {
		return false
	}
	for _, a := range s.apps {
		if a.Pool == pool || (pool == configs.PoolDefault && a.fallback != nil) {
			return true
		}
	}
	return false
}
