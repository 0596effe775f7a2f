package proxy

import "testing"

// TestNext walks next through every outcome in the states where it decides differently: a
// fresh forward, one after refusals as full, after a failure, after the queue, with a streamed
// body, with no retries left, and late (proxy.backend_timeout passed).
func TestNext(t *testing.T) {
	get := forwardState{idempotent: true, retries: 1}
	post := forwardState{retries: 1}
	streamed := forwardState{idempotent: true, streamed: true, retries: 1}
	with := func(s forwardState, f func(*forwardState)) forwardState {
		f(&s)
		return s
	}
	refused := with(get, func(s *forwardState) { s.refusals = 1 })
	failed := with(get, func(s *forwardState) { s.failures, s.last = 1, outcomeNotSent })
	noRetryLeft := with(failed, func(s *forwardState) { s.retries = 1 })
	queued := with(get, func(s *forwardState) { s.queued, s.exhausted = true, true })
	queuedBehind := with(get, func(s *forwardState) { s.queued = true }) // queued behind waiters: not reported
	nearMaxRefusals := with(get, func(s *forwardState) { s.refusals = maxFullRefusals - 1 })

	tests := []struct {
		name      string
		s         forwardState
		o         outcome
		late      bool
		want      step
		exhausted bool
		// wantState checks what next changed in the state; nil: nothing to check beyond the step.
		wantState func(forwardState) bool
	}{
		{name: "answered", s: get, o: outcomeOK, want: stepRelay},
		{name: "answered after refusals, late", s: refused, o: outcomeOK, late: true, want: stepRelay},
		{name: "answered after a failure", s: failed, o: outcomeOK, want: stepRelay},
		{name: "switched protocols", s: get, o: outcomeUpgraded, want: stepUpgraded},

		{name: "refused as full: next candidate, no retry used", s: post, o: outcomeFull, want: stepTry,
			wantState: func(s forwardState) bool { return s.refusals == 1 && s.failures == 0 }},
		{name: "refused as full after a failure: next candidate", s: failed, o: outcomeFull, want: stepTry},
		{name: "refused as full, streamed body: exhausted", s: streamed, o: outcomeFull, want: stepExhausted, exhausted: true},
		{name: "refused as full, late: exhausted", s: get, o: outcomeFull, late: true, want: stepExhausted, exhausted: true},
		{name: "refused as full, late, after a failure: the failure", s: failed, o: outcomeFull, late: true, want: stepFailed},
		{name: "refused as full by the last allowed: exhausted", s: nearMaxRefusals, o: outcomeFull, want: stepExhausted, exhausted: true},
		{name: "refused as full once exhausted was reported: not again", s: queued, o: outcomeFull, late: true, want: stepExhausted},

		{name: "not sent, POST: retried", s: post, o: outcomeNotSent, want: stepRetry,
			wantState: func(s forwardState) bool { return s.failures == 1 && s.last == outcomeNotSent }},
		{name: "not sent, streamed body: retried (nothing was sent)", s: streamed, o: outcomeNotSent, want: stepRetry},
		{name: "not sent, no retry left", s: noRetryLeft, o: outcomeNotSent, want: stepFailed},
		{name: "not sent, late", s: get, o: outcomeNotSent, late: true, want: stepFailed},
		{name: "not sent, no retries configured", s: forwardState{idempotent: true}, o: outcomeNotSent, want: stepFailed},
		{name: "connection failed, GET: retried", s: get, o: outcomeConnFailed, want: stepRetry},
		{name: "connection failed, POST: answered", s: post, o: outcomeConnFailed, want: stepFailed,
			wantState: func(s forwardState) bool { return s.last == outcomeConnFailed }},
		{name: "connection failed, streamed body: answered", s: streamed, o: outcomeConnFailed, want: stepFailed},
		{name: "connection failed after a refusal, GET: retried", s: refused, o: outcomeConnFailed, want: stepRetry},
		{name: "timeout, GET: never retried", s: get, o: outcomeTimeout, want: stepFailed,
			wantState: func(s forwardState) bool { return s.last == outcomeTimeout }},
		{name: "bad response, GET: never retried", s: get, o: outcomeBadResponse, want: stepFailed,
			wantState: func(s forwardState) bool { return s.last == outcomeBadResponse }},

		{name: "no candidate on the first try: exhausted, queue", s: get, o: outcomeNoCandidate, want: stepQueue, exhausted: true,
			wantState: func(s forwardState) bool { return s.queued && s.exhausted }},
		{name: "no candidate after refusals: exhausted, queue", s: refused, o: outcomeNoCandidate, want: stepQueue, exhausted: true},
		{name: "no candidate after a failure: the failure, not exhausted", s: failed, o: outcomeNoCandidate, want: stepFailed},
		{name: "no candidate after the queue: exhausted, reported once", s: queued, o: outcomeNoCandidate, want: stepExhausted},
		{name: "no candidate after queueing behind waiters: exhausted, reported", s: queuedBehind, o: outcomeNoCandidate, want: stepExhausted, exhausted: true},
		{name: "behind waiters: queue, not exhausted", s: get, o: outcomeBehindWaiters, want: stepQueue,
			wantState: func(s forwardState) bool { return s.queued && !s.exhausted }},
		{name: "behind waiters after a failure: the failure", s: failed, o: outcomeBehindWaiters, want: stepFailed},

		{name: "queue full", s: queued, o: outcomeQueueFull, want: stepQueueFull},
		{name: "queue timeout", s: queued, o: outcomeQueueTimeout, want: stepQueueTimeout},
		{name: "left the queue", s: queued, o: outcomeLeftQueue, want: stepLeftQueue},
		{name: "client gone", s: get, o: outcomeClientGone, want: stepClientGone},
		{name: "client gone after a failure", s: failed, o: outcomeClientGone, want: stepClientGone},
		{name: "streamed body too large", s: streamed, o: outcomeBodyTooLarge, want: stepTooLarge},
	}
	covered := map[outcome]bool{}
	for _, tt := range tests {
		covered[tt.o] = true
		t.Run(tt.name, func(t *testing.T) {
			s, act := next(tt.s, tt.o, tt.late)
			if act.step != tt.want || act.exhausted != tt.exhausted {
				t.Errorf("next(%+v, %d, late %v) = step %d, exhausted %v; want step %d, exhausted %v",
					tt.s, tt.o, tt.late, act.step, act.exhausted, tt.want, tt.exhausted)
			}
			if tt.wantState != nil && !tt.wantState(s) {
				t.Errorf("next(%+v, %d, late %v) left state %+v", tt.s, tt.o, tt.late, s)
			}
		})
	}
	for o := outcomeOK; o <= outcomeLeftQueue; o++ {
		if !covered[o] {
			t.Errorf("outcome %d has no case", o)
		}
	}
}

// TestNextBounds runs next over a whole forward of refusals and of failures: refusals stop at
// maxFullRefusals without using a retry, failures at proxy.retries, and pool_exhausted is
// reported at most once however the forward goes.
func TestNextBounds(t *testing.T) {
	t.Run("refusals", func(t *testing.T) {
		s, tries, reported := forwardState{idempotent: true, retries: 3}, 1, 0
		for {
			var act action
			s, act = next(s, outcomeFull, false)
			if act.exhausted {
				reported++
			}
			if act.step != stepTry {
				if act.step != stepExhausted {
					t.Fatalf("after %d refusals: step %d, want exhausted", tries, act.step)
				}
				break
			}
			tries++
		}
		if tries != maxFullRefusals || reported != 1 || s.failures != 0 {
			t.Errorf("%d tries, exhausted reported %d times, %d failures; want %d, 1, 0", tries, reported, s.failures, maxFullRefusals)
		}
	})
	t.Run("failures", func(t *testing.T) {
		s, tries := forwardState{idempotent: true, retries: 3}, 1
		for {
			var act action
			s, act = next(s, outcomeConnFailed, false)
			if act.exhausted {
				t.Fatal("a failure reported an exhausted pool")
			}
			if act.step != stepRetry {
				break
			}
			tries++
		}
		if tries != 1+3 {
			t.Errorf("%d tries with retries 3, want 4", tries)
		}
	})
	t.Run("no candidate before and after the queue", func(t *testing.T) {
		s, reported := forwardState{idempotent: true, retries: 1}, 0
		for _, o := range []outcome{outcomeNoCandidate, outcomeFull, outcomeNoCandidate} {
			var act action
			s, act = next(s, o, false)
			if act.exhausted {
				reported++
			}
		}
		if reported != 1 {
			t.Errorf("exhausted reported %d times in one request, want 1", reported)
		}
	})
}
