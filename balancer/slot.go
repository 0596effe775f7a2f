package balancer

import (
	"math"
	"sync/atomic"

	"pollbal/configs"
)

// slot is the in-flight count of one backend address and the block hints its releases raise.
// It belongs to the address, not to one configuration: every Backend with that address, in any
// snapshot, shares it, so a reload that changes the capacity, renames the id, or removes the
// backend and later adds it back keeps counting the leases still held on it, and the capacity
// limit holds across any sequence of reloads. It is safe for concurrent use and must not be
// copied.
//
// A slot fills a cache line of its own: every lease and release writes inFlight, and a pick
// reads the inFlight of many slots, so two slots on one line would make the leases of one
// backend slow down the picks and leases of its neighbour. The fields beside inFlight are read
// by the release that has just written it.
type slot struct {
	inFlight atomic.Int64
	hints    atomic.Pointer[[]hintReg] // block hints of the current candidate sets its backend is in
	queues   *waitQueues               // the balancer's queues (queue.go); nil in some tests
	stray    atomic.Int64              // releases that found nothing in flight: a Lease released twice
	_        [cacheLine - 32]byte
}

// cacheLine is the size of a cache line on the machines pollbal runs on (amd64, arm64).
const cacheLine = 64

// retired is the count a slot is set to when the registry forgets it: a pick through an older
// snapshot that still lists its backend then sees no spare and a take finds it full, so no lease
// can land on a slot that a later re-adding of the address would not share.
const retired = math.MaxInt64 / 2

// tryAcquire takes one slot if fewer than limit are in flight: one atomic check-and-take, so no
// interleaving of callers can put more than limit leases on the address. It returns the count
// it took the slot at (in flight, this lease included), 0 when it took none: the caller checks
// that count against the limit current after the take (Snapshot.takeSlot), since limit may have
// been read before a lowering.
func (s *slot) tryAcquire(limit int64) int64 {
	for {
		n := s.inFlight.Load()
		if n >= limit {
			return 0
		}
		if s.inFlight.CompareAndSwap(n, n+1) {
			return n + 1
		}
	}
}

// release returns a lease: it raises the spare hints of the blocks the address is in, so a pick
// never skips a block that now holds more spare than its hint says, and while requests are
// queued it hands the slot over to them (queue.go). With no queued request the queue costs one
// atomic load. It never takes the count below 0 (a second release of a copied Lease would):
// such a release is only counted as stray.
func (s *slot) release() {
	n := s.inFlight.Load()
	for n > 0 && !s.inFlight.CompareAndSwap(n, n-1) {
		n = s.inFlight.Load()
	}
	if n <= 0 {
		s.stray.Add(1)
		return
	}
	if regs := s.hints.Load(); regs != nil {
		for _, r := range *regs {
			r.hint.raise(r.capacity - n + 1)
		}
	}
	if q := s.queues; q != nil && q.waiting.Load() != 0 {
		q.wake()
	}
}

// count is the number of leases held, 0 for a retired slot.
func (s *slot) count() int64 {
	if n := s.inFlight.Load(); n < retired/2 {
		return n
	}
	return 0
}

// syncSlots gives the slot of every address of cfg from the registry, adding the new ones, and
// forgets the slots of addresses cfg no longer lists once nothing is in flight on them: until
// then they are kept, so that the address coming back finds its leases still counted. The
// caller holds the balancer's mutex. The registry is keyed by configs.AddressKey, so a reload
// that spells the same socket differently keeps its count.
func syncSlots(registry map[string]*slot, cfg *configs.Config, q *waitQueues) {
	listed := make(map[string]bool, len(cfg.Backends))
	for _, cb := range cfg.Backends {
		k := configs.AddressKey(cb.Address)
		listed[k] = true
		if registry[k] == nil {
			registry[k] = &slot{queues: q}
		}
	}
	for addr, s := range registry {
		if !listed[addr] && s.inFlight.CompareAndSwap(0, retired) {
			delete(registry, addr)
		}
	}
}
