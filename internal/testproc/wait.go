package testproc

import (
	"net"
	"testing"
	"time"
)

// WaitFor polls cond until it holds and returns how long that took; it fails the test when
// timeout passes first. The poll starts at 1 ms and backs off to 10 ms, so an in-process
// condition is seen at once and an HTTP one is not asked back to back.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	wait := time.Millisecond
	tick := time.NewTimer(wait)
	defer tick.Stop()
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
		wait = min(2*wait, 10*time.Millisecond)
		tick.Reset(wait)
	}
}

// FreeAddr returns a 127.0.0.1 address whose port was free a moment ago. Another process can
// take it before the caller binds it; a caller that cannot tolerate that retries.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
