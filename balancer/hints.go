package balancer

import "sync/atomic"

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
