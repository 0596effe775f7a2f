package balancer

import (
	"sort"
	"sync/atomic"
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

// member is one backend as it appears in a snapshot.
// What a pick's scan reads comes first, on one cache line.
type member struct {
	b        *Backend
	slot     *slot // b.slot, one load closer to the pick's scan
	capacity int64 // the configured capacity, or the one a fresh load report gave (fleet.go)
	pos      int   // its index among its pool's members in id order: its block is pos / hintBlock
	cfg      configs.Backend
	pool     string
	source   string
}

// The groups of a candidate set: a member that is ready and reports the list's service is in
// one of them, by the status it reports.
const (
	groupNone    int8 = -1
	groupServing int8 = 0
	groupLeaving int8 = 1
)

// groupOf is the group a backend with health h is in for a list of pool and service. It is
// a pure function.
func groupOf(h *Health, pool, service string) int8 {
	if !h.Ready || pool == configs.PoolUnassigned {
		return groupNone
	}
	for _, r := range h.Reports {
		if r.Service == service {
			if r.Status == protocol.Leaving {
				return groupLeaving
			}
			return groupServing
		}
	}
	return groupNone
}

// candList is the candidate list of one (pool, service) in a snapshot. It is immutable: its
// pool members are fixed for the snapshot. Which of them are ready and report the service
// (serving or leaving) is live state, kept in its cell (candCell) as the per-address slots keep
// in-flight counts: the snapshot references the cell and never writes it.
type candList struct {
	pool, service string
	pooled        []*member // every member of the pool, in id order; shared by the pool's lists
	rot           *rotation
	live          *candCell
	// uniform: every member of the pool has the same capacity, so removing a member never
	// lowers a set's largest capacity.
	uniform bool
}

// candCell is the live part of a candidate list: its current candSet, swapped atomically when
// one of the list's members changes group (regroup). The new set is the old one with that member
// inserted or removed, so a check result costs its own pool's lists a copy of their references,
// not a walk over the pool, and the other pools nothing. It is safe for concurrent use: picks
// load cur and read and tighten the hints; only the balancer, under its mutex, swaps cur and
// writes in.
type candCell struct {
	cur atomic.Pointer[candSet]
	// hints holds each group's spare hints, one per block of the list's pooled members
	// (hintBlock members in id order): the sets of the list share them, so a new set registers
	// nothing but the member that moved (hints.go).
	hints [2][]spareHint
	// in is the group each member of the list's pooled is in in cur. Written under the
	// balancer's mutex.
	in []int8
}

// candSet is an immutable ranking input: serving members first, then leaving ones, each in id
// order, with the block hints a pick uses to skip members that cannot win (hints.go). Once a
// reload replaces its list, it is marked stale and its hints are no longer raised by releases,
// so picks on it (a request still holding an older snapshot) scan it linearly.
type candSet struct {
	groups [2]rankGroup // serving, leaving
	maxCap int64        // largest capacity in the set: a member with that much spare cannot be beaten
	stale  atomic.Bool
}

// newCandList builds the list of (pool, service) over pooled from the members' live health.
func newCandList(pool, service string, pooled []*member, rot *rotation) *candList {
	c := &candCell{in: make([]int8, len(pooled))}
	l := &candList{pool: pool, service: service, pooled: pooled, rot: rot, live: c, uniform: true}
	blocks := (len(pooled) + hintBlock - 1) / hintBlock
	set := &candSet{}
	var ms [2][]*member
	for g := range c.hints {
		c.hints[g] = make([]spareHint, blocks)
	}
	for i, m := range pooled {
		l.uniform = l.uniform && m.capacity == pooled[0].capacity
		g := groupOf(m.b.Health(), pool, service)
		c.in[i] = g
		if g == groupNone {
			continue
		}
		ms[g] = append(ms[g], m)
		c.hints[g][i/hintBlock].raise(m.capacity)
		set.maxCap = max(set.maxCap, m.capacity)
	}
	for g := range set.groups {
		set.groups[g] = newRankGroup(ms[g], blocks, c.hints[g])
	}
	c.cur.Store(set)
	return l
}

// current is the list's candidate set now.
func (l *candList) current() *candSet { return l.live.cur.Load() }

// moved returns l's current set with m in group to, and how many members it read to make it;
// nil when m is there already. It publishes nothing. The caller holds the balancer's mutex.
func (l *candList) moved(m *member, to int8) (*candSet, int) {
	from := l.live.in[m.pos]
	if from == to {
		return nil, 0
	}
	old := l.current()
	next := &candSet{groups: old.groups, maxCap: old.maxCap}
	read, n := 0, 0
	if from != groupNone {
		next.groups[from], read = old.groups[from].without(m)
		if !l.uniform && m.capacity == old.maxCap {
			next.maxCap, n = next.largest()
			read += n
		}
	}
	if to != groupNone {
		next.groups[to], n = old.groups[to].with(m)
		next.maxCap = max(next.maxCap, m.capacity)
		read += n
	}
	return next, read
}

// largest is the largest capacity among the set's members, and how many it read.
func (set *candSet) largest() (int64, int) {
	var c int64
	n := 0
	for g := range set.groups {
		for _, m := range set.groups[g].members {
			c = max(c, m.capacity)
		}
		n += len(set.groups[g].members)
	}
	return c, n
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
	// Index is the app's position in its configuration (Config().Apps[Index]): what a reader
	// keeps per-app state by, for every snapshot of that configuration.
	Index int

	primary  *candList
	fallback *candList // nil when fallback is not allowed or the app already resolves to default
	counters *appCounters
}

// Snapshot is an immutable view of configuration, ownership and candidate lists. It is safe
// for concurrent use; it is replaced wholesale, never modified: none of its fields, nor those of
// its members, apps and lists, is written once it is published, and it holds no pointer back to
// the Balancer. What changes under it lives in cells it references and does not own: each
// backend's health, limit, load report and ejection (Backend), each address's in-flight count
// and hint registrations (slot), each list's current candidate set and hints (candCell), each
// (pool, service)'s rotation. A lease taken from it moves only those cells; it raises, counts
// and logs nothing.
type Snapshot struct {
	cfg       *configs.Config
	members   []*member // config order
	byID      map[string]*member
	apps      []*App
	router    router
	lists     map[[2]string]*candList
	pooled    map[string][]*member   // the members of each pool, in id order
	byPool    map[string][]*candList // the lists of each pool, regrouped on a member's health change
	slowStart time.Duration
	tieID     bool
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
	now       time.Time // for the age of load reports
	work      *setWork  // the balancer's tally of the candidate sets built
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
		pooled:    make(map[string][]*member),
		byPool:    make(map[string][]*candList),
		slowStart: cfg.Proxy.SlowStart,
		tieID:     cfg.Proxy.TieBreak == configs.TieBreakID,
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
		s.pooled[pool] = append(s.pooled[pool], m)
	}
	for _, ms := range s.pooled {
		sort.Slice(ms, func(i, j int) bool { return ms[i].cfg.ID < ms[j].cfg.ID })
		for i, m := range ms {
			m.pos = i
		}
	}
	// Candidate lists for every (pool, service) an app may use: its own pool and, where allowed,
	// default. The predicate re-checks the atomics at request time.
	for i, ca := range cfg.Apps {
		pool, resolution, allow := configs.AppPool(ca)
		a := &App{
			Index:         i,
			Name:          ca.Name,
			Service:       ca.Service,
			Pool:          pool,
			Resolution:    resolution,
			AllowFallback: allow,
			Hosts:         ca.Hosts,
			counters:      in.counters[ca.Name],
		}
		a.primary = s.list(pool, ca.Service, in.rotations, in.work)
		if allow && pool != configs.PoolDefault {
			a.fallback = s.list(configs.PoolDefault, ca.Service, in.rotations, in.work)
		}
		s.apps = append(s.apps, a)
	}
	s.router = newRouter(s.apps)
	return s
}

// list returns (building once, while the snapshot is built) the candidate list of (pool,
// service), and counts the set it builds in work.
func (s *Snapshot) list(pool, service string, rotations map[[2]string]*rotation, work *setWork) *candList {
	key := [2]string{pool, service}
	if l := s.lists[key]; l != nil {
		return l
	}
	rot := rotations[key]
	if rot == nil {
		rot = &rotation{}
		rotations[key] = rot
	}
	l := newCandList(pool, service, s.pooled[pool], rot)
	work.sets++
	work.members += len(l.pooled)
	s.lists[key] = l
	s.byPool[pool] = append(s.byPool[pool], l)
	return l
}

// regroup publishes, after m's health changed to h, the sets of the lists of its pool in s in
// which it changed group, each in its list's cell; every other set stays as it is, and so does
// s. It counts the sets it makes in work. The caller holds the balancer's mutex and s is the
// current snapshot.
//
// The order keeps the hint invariants (hints.go): m's releases raise the hints of both its old
// and its new groups before any new set is published, since a pick may still be scanning the
// old one; each group m joins has its block's hint raised to m's capacity after the set is
// published, since a pick on the old set, which does not list m, may have lowered it; and the
// old groups' hints are dropped from m's releases only once the new sets are out.
func regroup(s *Snapshot, m *member, h *Health, work *setWork) {
	lists := s.byPool[m.pool]
	var next []*candSet
	to := make([]int8, len(lists))
	for i, l := range lists {
		to[i] = groupOf(h, l.pool, l.service)
		set, read := l.moved(m, to[i])
		if set == nil {
			to[i] = groupNone
			continue
		}
		if next == nil {
			next = make([]*candSet, len(lists))
		}
		next[i] = set
		work.sets++
		work.members += read
	}
	if next == nil {
		return
	}
	m.slot.hints.Store(regsOf(m, lists, to))
	for i, l := range lists {
		if next[i] == nil {
			continue
		}
		l.live.in[m.pos] = to[i]
		l.live.cur.Store(next[i])
		if to[i] != groupNone {
			l.live.hints[to[i]][m.pos/hintBlock].raise(m.capacity)
		}
	}
	m.slot.hints.Store(regsOf(m, lists, nil))
}

// retire marks every current candidate set of s, a snapshot that a rebuild replaced, as stale.
// The caller holds the balancer's mutex.
func retire(s *Snapshot) {
	for _, l := range s.lists {
		l.current().stale.Store(true)
	}
}

// registerAll registers the hints of every candidate set of s, a snapshot about to be
// published; members of pools without lists raise none. The caller holds the balancer's mutex.
func registerAll(s *Snapshot) {
	for _, m := range s.members {
		m.slot.hints.Store(regsOf(m, s.byPool[m.pool], nil))
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
