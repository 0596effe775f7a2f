package clientconn

import (
	"testing"
	"time"
)

func TestJudgeClient(t *testing.T) {
	lim := Limits{Header: 10 * time.Second, Client: 60 * time.Second, Idle: 30 * time.Second}
	const (
		header  = 3*phaseStep + phaseHeader // phaseHeader is 0: a sequence with the header phase
		busy    = 4*phaseStep | phaseBusy
		idle    = 5*phaseStep | phaseIdle
		hijack  = 6*phaseStep | phaseHijacked
		reading = 7*ioStep | ioReading
		writing = 9*ioStep | ioWriting
		quiet   = 8 * ioStep
	)
	s := time.Second
	tests := []struct {
		name      string
		rec       record
		phase, io uint64
		now       time.Duration
		lim       Limits
		stopping  bool
		wantSince time.Duration
		want      verdict
	}{
		{name: "new connection within header_timeout", rec: record{phase: 0, since: 5 * s}, phase: 0, now: 14 * s, lim: lim, wantSince: 5 * s, want: keepConn},
		{name: "new connection at header_timeout gets 408", rec: record{phase: 0, since: 5 * s}, phase: 0, now: 15 * s, lim: lim, wantSince: 5 * s, want: cutHeader},
		{name: "header phase not extended by bytes trickling in", rec: record{phase: header, io: quiet, since: 1 * s}, phase: header, io: reading + 40*ioStep, now: 11 * s, lim: lim, wantSince: 1 * s, want: cutHeader},
		{name: "header phase first seen now is timed from now", rec: record{phase: idle, since: 0}, phase: header, now: 50 * s, lim: lim, wantSince: 50 * s, want: keepConn},
		{name: "late headers while a pipelined answer is written: close without 408", rec: record{phase: header, since: 0}, phase: header, io: writing, now: 10 * s, lim: lim, want: cutHeaderMute},
		{name: "header_timeout 0 disables it", rec: record{phase: header, since: 0}, phase: header, now: time.Hour, lim: Limits{}, want: keepConn},
		{name: "idle within idle_timeout", rec: record{phase: idle, since: 0}, phase: idle, io: reading, now: 29 * s, lim: lim, want: keepConn},
		{name: "idle at idle_timeout", rec: record{phase: idle, since: 0}, phase: idle, io: reading, now: 30 * s, lim: lim, want: cutIdle},
		{name: "a quick request between two scans starts a new idle period", rec: record{phase: idle, since: 0}, phase: idle + 3*phaseStep, now: 30 * s, lim: lim, wantSince: 30 * s, want: keepConn},
		{name: "busy reading the body, stalled for client_timeout", rec: record{phase: busy, io: reading, since: 0}, phase: busy, io: reading, now: 60 * s, lim: lim, want: cutClient},
		{name: "busy writing the answer, stalled for client_timeout", rec: record{phase: busy, io: writing, since: 0}, phase: busy, io: writing, now: 60 * s, lim: lim, want: cutClient},
		{name: "busy with progress since the last scan", rec: record{phase: busy, io: writing, since: 0}, phase: busy, io: writing + 2*ioStep, now: 60 * s, lim: lim, wantSince: 60 * s, want: keepConn},
		{name: "busy waiting on the backend is not the client's fault", rec: record{phase: busy, io: quiet, since: 0}, phase: busy, io: quiet, now: time.Hour, lim: lim, want: keepConn},
		{name: "hijacked connections are not timed", rec: record{phase: hijack, io: reading, since: 0}, phase: hijack, io: reading, now: time.Hour, lim: lim, want: keepConn},
		{name: "stopping closes a connection idle for the drain grace", rec: record{phase: idle, since: 0}, phase: idle, now: drainGrace, lim: lim, stopping: true, want: closeQuiet},
		{name: "stopping closes a connection idle since long at once", rec: record{phase: idle, since: 0}, phase: idle, now: s, lim: lim, stopping: true, want: closeQuiet},
		{name: "stopping keeps a connection idle for less than the grace: its next request may be on its way", rec: record{phase: idle, since: 0}, phase: idle, io: reading, now: drainGrace - 1, lim: lim, stopping: true, want: keepDraining},
		{name: "stopping times a connection that just went idle from now", rec: record{phase: idle, since: 0}, phase: idle + 3*phaseStep, now: 10 * s, lim: lim, stopping: true, wantSince: 10 * s, want: keepDraining},
		{name: "stopping closes half-sent headers at once", rec: record{phase: header, since: 0}, phase: header, io: reading, now: s, lim: lim, stopping: true, want: closeQuiet},
		{name: "stopping closes half-sent headers seen first now at once", rec: record{phase: idle, since: 0}, phase: header, io: reading, now: s, lim: lim, stopping: true, wantSince: s, want: closeQuiet},
		{name: "stopping closes a new connection whose first bytes arrived at once", rec: record{phase: 0, since: 0}, phase: 0, io: 3*ioStep | ioReading, now: 10 * time.Millisecond, lim: lim, stopping: true, want: closeQuiet},
		{name: "stopping keeps a new connection that sent nothing yet for the grace", rec: record{phase: 0, since: 0}, phase: 0, io: ioStep | ioReading, now: drainGrace - 1, lim: lim, stopping: true, want: keepDraining},
		{name: "stopping closes a new connection that sent nothing for the grace", rec: record{phase: 0, since: 0}, phase: 0, io: ioStep | ioReading, now: drainGrace, lim: lim, stopping: true, want: closeQuiet},
		{name: "stopping waits for a request in flight", rec: record{phase: busy, io: quiet, since: 0}, phase: busy, io: quiet, now: s, lim: lim, stopping: true, want: keepConn},
		{name: "stopping leaves hijacked connections alone", rec: record{phase: hijack, io: reading, since: 0}, phase: hijack, io: reading, now: s, lim: lim, stopping: true, want: keepConn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, v := judgeClient(tt.rec, tt.phase, tt.io, tt.now, tt.lim, tt.stopping)
			if v != tt.want {
				t.Errorf("verdict %d, want %d", v, tt.want)
			}
			if rec.since != tt.wantSince || rec.phase != tt.phase || rec.io != tt.io {
				t.Errorf("record %+v, want since %s with the words seen", rec, tt.wantSince)
			}
		})
	}
}

func TestHeadersEnd(t *testing.T) {
	tests := []struct {
		name        string
		matched     int
		p           string
		wantMatched int
		wantDone    bool
	}{
		{name: "whole request in one read", p: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", wantDone: true},
		{name: "headers and part of the body", p: "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", wantDone: true},
		{name: "unfinished", p: "GET / HTTP/1.1\r\nHost: a", wantMatched: 0},
		{name: "ends with the first half of the mark", p: "GET / HTTP/1.1\r\nHost: a\r\n", wantMatched: 2},
		{name: "ends with three bytes of the mark", p: "Host: a\r\n\r", wantMatched: 3},
		{name: "mark completed by the next read", matched: 3, p: "\n", wantDone: true},
		{name: "mark completed across reads with body", matched: 2, p: "\r\nbody", wantDone: true},
		{name: "partial mark continued but not finished", matched: 1, p: "\n\r", wantMatched: 3},
		{name: "partial mark broken by a header", matched: 2, p: "X-A: 1\r\n", wantMatched: 2},
		{name: "partial mark broken, the mark later in the read", matched: 2, p: "X-A: 1\r\n\r\n", wantDone: true},
		{name: "bare LF line endings never end the block", p: "GET / HTTP/1.1\nHost: a\n\n", wantMatched: 0},
		{name: "empty read", matched: 2, p: "", wantMatched: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, done := headersEnd(tt.matched, []byte(tt.p))
			if m != tt.wantMatched || done != tt.wantDone {
				t.Errorf("headersEnd(%d, %q) = %d, %v; want %d, %v", tt.matched, tt.p, m, done, tt.wantMatched, tt.wantDone)
			}
		})
	}
}

func TestScanTick(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
		want time.Duration
	}{
		{name: "defaults", lim: Limits{Header: 10 * time.Second, Client: time.Minute, Idle: time.Minute}, want: maxScanTick},
		{name: "a tenth of the shortest", lim: Limits{Header: time.Second, Client: time.Minute}, want: 100 * time.Millisecond},
		{name: "never below the floor", lim: Limits{Idle: 20 * time.Millisecond}, want: minScanTick},
		{name: "all disabled", lim: Limits{}, want: maxScanTick},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scanTick(tt.lim); got != tt.want {
				t.Errorf("scanTick = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNextAcceptBackoff(t *testing.T) {
	tests := []struct {
		name       string
		prev, want time.Duration
	}{
		{name: "first failure", prev: 0, want: minAcceptBackoff},
		{name: "doubles", prev: 20 * time.Millisecond, want: 40 * time.Millisecond},
		{name: "capped", prev: 150 * time.Millisecond, want: maxAcceptBackoff},
		{name: "stays capped", prev: maxAcceptBackoff, want: maxAcceptBackoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextAcceptBackoff(tt.prev); got != tt.want {
				t.Errorf("nextAcceptBackoff(%s) = %s, want %s", tt.prev, got, tt.want)
			}
		})
	}
}

func TestHeadersEndDoesNotAllocate(t *testing.T) {
	p := []byte("GET /index.html HTTP/1.1\r\nHost: www.shop.test\r\nAccept: */*\r\n\r\n")
	if n := testing.AllocsPerRun(100, func() { headersEnd(0, p) }); n != 0 {
		t.Errorf("headersEnd allocates %v times per call", n)
	}
}
