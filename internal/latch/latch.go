// Package latch is a one-shot signal: set once, it stays set, and any number of goroutines may
// wait for it or check it. The poller's first round, a proxy listener's close and the demo's
// child processes' exit are each one.
package latch

import "sync"

// Latch is a signal that is set once and stays set. Make one with New. It is safe for
// concurrent use and must not be copied.
type Latch struct {
	once sync.Once
	done chan struct{}
}

// New returns a latch not yet set.
func New() *Latch { return &Latch{done: make(chan struct{})} }

// Set sets the latch, and reports whether this call did: only the first call does anything.
func (l *Latch) Set() bool {
	set := false
	l.once.Do(func() {
		close(l.done)
		set = true
	})
	return set
}

// Done is closed when the latch is set, for a select.
func (l *Latch) Done() <-chan struct{} { return l.done }

// IsSet reports whether the latch is set.
func (l *Latch) IsSet() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}
