package poller

import (
	"strings"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

// Regression: backoff started at the first failed check even while the backend was still
// ready under fall > 1, so with interval 1s, fall 5, max_backoff 5s a dead backend stayed
// ready (and took traffic) for 12 s instead of 4 s.
func TestFallNotDelayedByBackoff(t *testing.T) {
	s := configs.Poll{Interval: time.Second, Timeout: 800 * time.Millisecond, Rise: 1, Fall: 5,
		MaxBackoff: 5 * time.Second, MaxBody: 4096}
	p := newPoller(t, Options{Settings: s, Sink: newFakeSink()})
	tg := newTarget(Target{ID: "a", Address: "127.0.0.1:1"}, s, p.metrics.forTarget("a"), p.buffers, nil)
	p.record(tg, s, outcome{reports: []protocol.Report{}, result: resultOK})
	var elapsed time.Duration
	for !func() bool {
		p.record(tg, s, outcome{reason: "status 503", result: resultError})
		return !tg.last.Ready
	}() {
		elapsed += tg.delay
	}
	if want := time.Duration(s.Fall-1) * s.Interval; elapsed != want {
		t.Fatalf("not ready %v after the first failure, want %v (fall=%d, interval=%v)", elapsed, want, s.Fall, s.Interval)
	}
	// Once not ready, backoff applies.
	p.record(tg, s, outcome{reason: "status 503", result: resultError})
	if tg.delay <= s.Interval {
		t.Fatalf("delay %v after going not ready, want backoff above the interval", tg.delay)
	}
}

func TestCapReason(t *testing.T) {
	long := "error when reading response headers: " + strings.Repeat("x", 3000)
	tests := []struct {
		name, in, want string
	}{
		{name: "short text kept", in: "some error", want: "some error"},
		{name: "detail after the first colon dropped", in: long, want: "error when reading response headers"},
		{name: "long text without a colon cut", in: strings.Repeat("é", 100), want: strings.Repeat("é", 40) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := capReason(tc.in); got != tc.want {
				t.Fatalf("capReason = %q, want %q", got, tc.want)
			}
		})
	}
}
