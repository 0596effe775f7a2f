package testproc

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkers: every worker runs with its own number and its own count of calls; a worker
// whose work returns false ends alone; stop ends the others and waits for them.
func TestWorkers(t *testing.T) {
	const n = 4
	var calls [n]atomic.Int64
	var bad atomic.Int64 // calls whose i was not the worker's count of calls before
	var running atomic.Int64
	stop := Workers(n, func(w, i int) bool {
		running.Add(1)
		defer running.Add(-1)
		if int64(i) != calls[w].Add(1)-1 {
			bad.Add(1)
		}
		return w != 0 || i < 9 // worker 0 ends after its 10th call
	})
	WaitFor(t, 10*time.Second, "every worker past 100 calls", func() bool {
		for w := 1; w < n; w++ {
			if calls[w].Load() < 100 {
				return false
			}
		}
		return true
	})
	stop()
	stop() // again: nothing to do
	if r := running.Load(); r != 0 {
		t.Errorf("%d calls still running after stop returned", r)
	}
	if b := bad.Load(); b != 0 {
		t.Errorf("%d calls got a wrong count", b)
	}
	if c := calls[0].Load(); c != 10 {
		t.Errorf("worker 0 made %d calls, want 10 (its work returned false on the 10th)", c)
	}
}
