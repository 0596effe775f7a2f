package proxy

import "runtime"

// yieldIfBusy lets the goroutines already runnable go first when the proxy is busy. It is
// called just before a read that would nearly always find nothing if made at once: a
// kept-alive client's next request right after its response was written, and a backend's
// answer right after the request was sent. Go reads first and parks on the poller only when
// the read returns EAGAIN, so such a read costs a system call that returns nothing; after a
// turn of the other runnable goroutines the bytes have usually arrived and the read finds them.
// What it saves and what it costs: bench/README.md, "Yielding before early reads".
//
// The yield puts the goroutine at the back of the global run queue, and Go polls the network
// only when the run queues are empty: a goroutine that still found nothing and parked waits
// longer to be woken, so under saturation the slowest requests are slower. When the proxy is not busy (no more requests in the handler than
// GOMAXPROCS) there is nothing to let go first, and a yield would only wake an idle thread:
// then the read is made at once.
func (p *Proxy) yieldIfBusy() {
	if p.handling.Load() > p.procs {
		runtime.Gosched()
	}
}
