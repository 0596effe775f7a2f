package balancer

import "sync/atomic"

// Block hints: why they exist, what must hold, and how it holds.
//
// A pick wants the member with the most spare (limit - in-flight). With an idle member it stops
// at once (spare equal to the set's largest capacity cannot be beaten); on a busy pool it would
// read every member. Measured on a 2-core machine (BenchmarkAcquirePlainScan, the hints unused,
// against BenchmarkAcquire/busy), select+lease+release on pools whose every backend holds
// leases costs 5.1-6.2 µs of CPU at 1,024 backends without the hints and 0.33-0.37 µs at 64,
// against 0.30-0.37 µs and 0.13-0.17 µs with them. A scan stays well over 1 µs at 1,024
// (15-18 times the cost with hints), so the hints stay.
//
// Invariants, for a candidate set that is not stale:
//
//  1. Bound: each block's hint is at least capacity - in-flight of every member of the block,
//     whenever no release or tighten on the block is between two of its steps. A new set's
//     hints start at the largest capacity of the block (newRankGroup).
//  2. Raise: a release takes its count down first and then raises every hint registered on its
//     slot to capacity - the new count (slot.release; a raise writes only when the hint is
//     lower, so an idle pool's releases only load it).
//  3. Tighten: a pick lowers a hint only after scanning the whole block, only by a
//     compare-and-swap from the value it read before the scan, and then re-reads the block and
//     raises the hint for any member above what it saw (spareHint.tighten).
//  4. Register, then publish: a set's hints are registered on its members' slots before the
//     set is published, so every release that follows a pick's load of the set raises them.
//  5. Stale, then unregister: a set is marked stale before a newer set's registration takes its
//     members' slots away from it; a pick that finds its set stale ignores the hints and scans.
//  6. Limits stay within the capacities the hints were built with (fleet.go), so skipping a
//     block whose hint is no more than the best spare found skips nothing better.
//
// The hints only steer the choice: the lease itself is slot.tryAcquire's check-and-take against
// the limit, checked again against the limit current after the take (Snapshot.lease), so no
// interleaving of hints or limit changes can put a backend over its limit. What the invariants
// prevent is a pick on a current set that skips a member with more spare (a worse choice), or
// finds none while one is free (a 503 on a free backend).
//
// Worked interleaving for 3 (why the re-read): one block, members x and y of capacity 4, both
// with 3 in flight, hint 4. Pick P and a release R of a lease on x:
//
//	P  seen := hint (4)
//	P  reads x: 3 in flight, y: 3 in flight; top = 1
//	R  x: 3 -> 2 in flight (spare 2)
//	R  raise(2): loads hint 4 >= 2, writes nothing
//	P  CAS(hint, 4, 1) succeeds: hint 1 < x's spare 2, too low
//	P  re-reads x: spare 2 > top, raise(2): hint 2, the bound holds again
//
// R's decrement comes before R's load of the hint, which read 4 and so came before P's CAS;
// P's re-read comes after its CAS. Go's atomics are sequentially consistent, so the re-read
// sees the decrement. Had R loaded the hint after the CAS, it would have read 1 and raised it
// itself. Without the re-read the hint would stay 1 until another release in the block, and
// every pick would skip x's block while it has the most spare.
//
// Worked interleaving for 4 (why register before publish): a health change builds set S2 for
// a pool whose set was S1; x is full.
//
//	publish S2 (hints 4)                          <- if this came first
//	P  picks on S2: x full, y full; tightens S2's hint to 0 (re-read: still full)
//	R  releases on x: x's slot still raises S1's hints only
//	register S2's hints on x and y                <- too late: S2's hint stays 0
//
// Every later pick on S2 skips the block while x is free, so the pool answers 503 with a free
// backend until some other release in the block. Registering before publishing means every
// release after a pick could see S2 raises S2's hints.
//
// Worked interleaving for 5 (why stale first): S1 stays reachable after S2 replaces it through
// the snapshot of every request in flight (a retry picks from its request's snapshot). Once
// registration moves x's slot to S2's hints, releases no longer raise S1's. A retry that then
// read S1's hints would skip x's block for good. Marking S1 stale first makes every pick that
// starts afterwards scan S1 member by member; a pick that checked the flag just before may
// still use S1's hints, and its result is one it could have had just before the releases it
// misses. Reloads (Balancer.rebuildLocked) follow the same order: the old snapshot's sets are
// retired, backends that left or were replaced stop raising any hint, then the new snapshot's
// sets are registered, then it is published.

// hintBlock is how many consecutive members of a rank group share one spare hint. A pick reads
// one hint per block and scans only blocks that could hold a better candidate than the best
// found so far, so a busy pool of n members costs about n/hintBlock hint loads plus a few scans.
const hintBlock = 32

// rankGroup is one ordered part of a candSet (serving or leaving) with its block hints:
// hints[k] covers members[k*hintBlock : (k+1)*hintBlock].
type rankGroup struct {
	members []*member
	hints   []spareHint
}

func newRankGroup(ms []*member) rankGroup {
	g := rankGroup{members: ms, hints: make([]spareHint, (len(ms)+hintBlock-1)/hintBlock)}
	for i, m := range ms {
		g.hints[i/hintBlock].raise(m.capacity)
	}
	return g
}

// block returns the members hint k covers.
func (g *rankGroup) block(k int) []*member {
	return g.members[k*hintBlock : min((k+1)*hintBlock, len(g.members))]
}

// spareHint is an upper bound on capacity - in-flight over the members of one block, whatever
// their readiness, ejection or tried state (slow start limits are below capacity, so it holds
// for them too). Releases raise it; a pick that scanned the whole block lowers it to what it saw
// and then re-reads the block, raising it again for any release its scan missed. So it is an
// exact upper bound whenever no lease operation is in progress, and at worst briefly low while
// one races a pick. It is safe for concurrent use; each hint has its own cache line.
type spareHint struct {
	bound atomic.Int64
	_     [56]byte
}

// raise makes the bound at least spare; it writes only when the bound is lower.
func (h *spareHint) raise(spare int64) {
	for {
		old := h.bound.Load()
		if old >= spare || h.bound.CompareAndSwap(old, spare) {
			return
		}
	}
}

// tighten lowers the bound from seen (read before the scan) to top (the largest spare the scan
// of the whole block ms saw), then re-reads ms: a release between a member's read and the
// compare-and-swap may have found the old bound high enough and not raised it.
func (h *spareHint) tighten(seen, top int64, ms []*member) {
	if top >= seen || !h.bound.CompareAndSwap(seen, top) {
		return
	}
	for _, m := range ms {
		if spare := m.capacity - m.slot.inFlight.Load(); spare > top {
			h.raise(spare)
		}
	}
}

// hintReg is one block hint a backend's releases (on its address's slot) must raise, with the
// backend's capacity in the candidate set that block belongs to.
type hintReg struct {
	hint     *spareHint
	capacity int64
}

// registerHints points every backend of pooled (one pool's members) at the block hints of sets
// (that pool's candidate sets), so that its releases raise them. Callers hold the balancer's
// mutex, mark the sets these replace stale first, and publish sets only afterwards: a pick on a
// non-stale set then only tightens hints that its backends' releases raise.
func registerHints(pooled []*member, sets []*candSet) {
	regs := make(map[*slot][]hintReg, len(pooled))
	for _, set := range sets {
		set.eachReg(func(s *slot, r hintReg) { regs[s] = append(regs[s], r) })
	}
	for _, m := range pooled {
		if rs := regs[m.slot]; len(rs) > 0 {
			m.slot.hints.Store(&rs)
		} else {
			m.slot.hints.Store(nil)
		}
	}
}

// eachReg calls f for every (member's slot, hint) pair of the set.
func (set *candSet) eachReg(f func(*slot, hintReg)) {
	for gi := range set.groups {
		g := &set.groups[gi]
		for i, m := range g.members {
			f(m.slot, hintReg{hint: &g.hints[i/hintBlock], capacity: m.capacity})
		}
	}
}
