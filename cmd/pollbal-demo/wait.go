package main

import (
	"context"
	"fmt"
	"time"
)

// bg is a goroutine that runs until stopped.
type bg struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// background runs f in a goroutine with a context that stop cancels.
func background(f func(ctx context.Context)) *bg {
	ctx, cancel := context.WithCancel(context.Background())
	b := &bg{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		f(ctx)
	}()
	return b
}

// stop cancels the goroutine's context and waits for it to return. It is idempotent.
func (b *bg) stop() {
	b.cancel()
	<-b.done
}

// waitUntil calls cond every interval until it reports done, fails, ctx ends or timeout
// passes.
func waitUntil(ctx context.Context, timeout, every time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("%s: not within %s", what, timeout)
		case <-tick.C:
		}
	}
}
