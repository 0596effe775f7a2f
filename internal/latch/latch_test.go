package latch

import (
	"sync"
	"testing"
)

func TestLatch(t *testing.T) {
	l := New()
	if l.IsSet() {
		t.Fatal("a new latch is set")
	}
	select {
	case <-l.Done():
		t.Fatal("Done is closed before Set")
	default:
	}
	if !l.Set() {
		t.Fatal("the first Set reports that it did not set the latch")
	}
	if !l.IsSet() {
		t.Fatal("IsSet is false after Set")
	}
	<-l.Done() // closed: does not block
	if l.Set() {
		t.Fatal("a second Set reports that it set the latch")
	}
}

// TestLatchConcurrentSet: of many goroutines that set the latch at once, exactly one is told it
// did, and every waiter is released.
func TestLatchConcurrentSet(t *testing.T) {
	l := New()
	const n = 16
	var wg sync.WaitGroup
	setters := make(chan bool, n)
	for range n {
		wg.Go(func() { <-l.Done() })
		wg.Go(func() { setters <- l.Set() })
	}
	wg.Wait()
	close(setters)
	won := 0
	for s := range setters {
		if s {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d Set calls reported setting the latch, want 1", won)
	}
}
