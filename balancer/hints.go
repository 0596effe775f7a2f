package balancer

import "sync/atomic"

// Block hints: why they exist, what must hold, and how it holds.
//
// A pick wants the member with the most spare (limit - in-flight). With an idle member it stops
// at once (spare equal to the set's largest capacity cannot be beaten); on a busy pool it would
// read every member. The hints let it skip whole blocks; on a busy pool of a thousand backends
// that is an order of magnitude less work per pick (bench/TUNING.md, "Block hints";
// BenchmarkAcquirePlainScan against BenchmarkAcquire/busy re-measures it).
//
// The hints belong to a candidate list (one (pool, service) of a snapshot) and live in its cell
// (candCell), one per group and block of the pool's members in id order; every set of the list
// shares them. A health change replaces a list's set with one where a member joined or left a
// group; the other members keep their blocks and their registrations, so a change costs its
// pool no walk over its members.
//
// Invariants, for a list whose set is not stale:
//
//  1. Bound: each block's hint is at least capacity - in-flight of every member of the block in
//     the current set, whenever no release, tighten or join on the block is between two of its
//     steps. A new list's hints start at the largest capacity of each block (newCandList).
//  2. Raise: a release takes its count down first and then raises every hint registered on its
//     slot to capacity - the new count (slot.release; a raise writes only when the hint is
//     lower, so an idle pool's releases only load it).
//  3. Tighten: a pick lowers a hint only after scanning the whole block, only by a
//     compare-and-swap from the value it read before the scan, and then re-reads the block as
//     the list's current set has it and raises the hint for any member above what it saw
//     (spareHint.tighten).
//  4. Register, then publish: a member's slot raises the hints of the groups it is joining
//     before the set that has it there is published, so every release that follows a pick's
//     load of the set raises them; it stops raising the hints of the groups it left only after
//     (regroup, snapshot.go).
//  5. Join, then raise: once a set where a member joined a group is published, the block's hint
//     is raised to the member's capacity (a pick on the older set, which does not list the
//     member, may have lowered it below the member's spare).
//  6. Stale, then unregister: when a reload replaces a snapshot, its sets are marked stale
//     before the new snapshot's registration takes their members' slots away from their hints;
//     a pick that finds its set stale ignores the hints and scans.
//  7. Limits stay within the capacities the hints were built with (fleet.go), so skipping a
//     block whose hint is no more than the best spare found skips nothing better.
//
// The hints only steer the choice: the lease itself is slot.tryAcquire's check-and-take against
// the limit, checked again against the limit current after the take (Snapshot.takeSlot), so no
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
// Worked interleaving for 4 (why register before publish): x, full, becomes ready and joins
// the serving group of a list whose block already holds y, full too.
//
//	publish S2 with x                             <- if this came first
//	P  picks on S2: x full, y full; tightens the hint to 0 (re-read: still full)
//	R  releases on x: x's slot raises no hint of the list yet
//	register the hint on x                        <- too late: the hint stays 0
//
// Every later pick skips the block while x is free, so the pool answers 503 with a free backend
// until some other release in the block. Registering before publishing means every release
// after a pick could see S2 raises the hint.
//
// Worked interleaving for 5 (why raise after the join): x, idle, joins a block where y is full.
//
//	P  picks on S1 (y only): seen := hint (4); reads y: full; top = 0
//	   x is registered, S2 (x and y) is published
//	P  CAS(hint, 4, 0) succeeds; re-reads the block of S2: x's spare 4, raise(4)
//
// P's re-read reads the list's current set, so it sees x when its CAS came after the publish.
// When the CAS came before it, the raise after the publish reads the hint P lowered and raises
// it. A pick on S2 between the publish and that raise may skip x's block; its result is one
// it could have had on S1, just before x joined.
//
// Worked interleaving for 6 (why stale first): S1, a set of the snapshot a reload replaces,
// stays reachable through every request in flight (a retry picks from its request's
// snapshot). Once the new snapshot's registration moves x's slot to its own lists' hints,
// releases no longer raise S1's. A retry that then read S1's hints would skip x's block for
// good. Marking S1 stale first makes every pick that starts afterwards scan S1 member by
// member; a pick that checked the flag just before may still use S1's hints, and its result is
// one it could have had just before the releases it misses. Balancer.rebuildLocked follows
// that order: the old snapshot's sets are retired, backends that left or were replaced stop
// raising any hint, then the new snapshot's sets are registered, then it is published.

// hintBlock is how many consecutive members of a pool (in id order) share one spare hint in each
// group. A pick reads one hint per block that holds members of its group and scans only blocks
// that could hold a better candidate than the best found so far, so a busy pool of n members
// costs about n/hintBlock hint loads plus a few scans.
const hintBlock = 32

// rankGroup is one ordered part of a candSet (serving or leaving) with its block hints. Blocks
// are cut in the pool's id order, not the group's: block k is the members whose pos is in
// [k*hintBlock, (k+1)*hintBlock), members[starts[k]:starts[k+1]], so a member joining or
// leaving the group changes no other member's block and no hint registration.
type rankGroup struct {
	members []*member   // in id order
	starts  []int32     // len(hints)+1 bounds into members
	hints   []spareHint // the list's hints of this group, one per block of the pool
}

// newRankGroup builds the group of ms (in id order) over blocks blocks and the list's hints.
func newRankGroup(ms []*member, blocks int, hints []spareHint) rankGroup {
	g := rankGroup{members: ms, starts: make([]int32, blocks+1), hints: hints}
	for _, m := range ms {
		g.starts[m.pos/hintBlock+1]++
	}
	for k := 1; k <= blocks; k++ {
		g.starts[k] += g.starts[k-1]
	}
	return g
}

// block returns the members hint k covers.
func (g *rankGroup) block(k int) []*member {
	return g.members[g.starts[k]:g.starts[k+1]]
}

// with returns g with m added in id order, and how many members it read to find the place: at
// most a block's.
func (g rankGroup) with(m *member) (rankGroup, int) {
	k := m.pos / hintBlock
	i, read := int(g.starts[k]), 0
	for ; i < int(g.starts[k+1]) && g.members[i].pos < m.pos; i++ {
		read++
	}
	ms := make([]*member, len(g.members)+1)
	copy(ms, g.members[:i])
	ms[i] = m
	copy(ms[i+1:], g.members[i:])
	return rankGroup{members: ms, starts: shifted(g.starts, k, 1), hints: g.hints}, read
}

// without returns g without m (which it holds), and how many members it read to find it: at
// most a block's.
func (g rankGroup) without(m *member) (rankGroup, int) {
	k := m.pos / hintBlock
	i, read := int(g.starts[k]), 1
	for ; g.members[i] != m; i++ {
		read++
	}
	ms := make([]*member, len(g.members)-1)
	copy(ms, g.members[:i])
	copy(ms[i:], g.members[i+1:])
	return rankGroup{members: ms, starts: shifted(g.starts, k, -1), hints: g.hints}, read
}

// shifted returns a copy of starts with the bounds after block k moved by d.
func shifted(starts []int32, k int, d int32) []int32 {
	out := make([]int32, len(starts))
	copy(out, starts)
	for j := k + 1; j < len(out); j++ {
		out[j] += d
	}
	return out
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
// of the whole block saw), then re-reads the block as the list's current set has it (g is the
// group, k the block): a release between a member's read and the compare-and-swap may have
// found the old bound high enough and not raised it, and a member that joined the group after
// the pick loaded its set had its raise before the swap.
func (h *spareHint) tighten(seen, top int64, l *candList, g, k int) {
	if top >= seen || !h.bound.CompareAndSwap(seen, top) {
		return
	}
	cur := l.current()
	for _, m := range cur.groups[g].block(k) {
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

// regsOf is what m's releases must raise: for each list of its pool (lists), the hint of m's
// block in the group the list has it in, and in also[i] where also is given (a group it is
// joining in list i). nil when it is in no group.
func regsOf(m *member, lists []*candList, also []int8) *[]hintReg {
	var regs []hintReg
	k := m.pos / hintBlock
	for i, l := range lists {
		if g := l.live.in[m.pos]; g != groupNone {
			regs = append(regs, hintReg{hint: &l.live.hints[g][k], capacity: m.capacity})
		}
		if also != nil && also[i] != groupNone && also[i] != l.live.in[m.pos] {
			regs = append(regs, hintReg{hint: &l.live.hints[also[i]][k], capacity: m.capacity})
		}
	}
	if regs == nil {
		return nil
	}
	return &regs
}
