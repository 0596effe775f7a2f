package main

import (
	"fmt"
	"io"
	"time"
)

// summary is the outcome of one demo run.
type summary struct {
	Elapsed    time.Duration
	Stopped    string // why the run ended early ("" when every update script finished)
	Served     int64
	Failed     int64
	Failures   []string // the first few failed requests
	Backends   int
	Updated    int      // backends whose script exited 0 and that pollbal shows serving NewVersion
	NotUpdated []string // why each other backend is not counted as updated
	NewVersion string
	Rounds     int
	Pools      []poolMin
	Samples    int // /api/state samples the minimums cover
	// SampleFailures counts /api/state requests that got no good answer (not in Samples).
	SampleFailures int
	Warnings       int64 // POST /pool_warning received by all backends
	StartOvers     int   // update attempts the scripts postponed because of a fresh lock
}

// problems returns why the run failed; none means it passed. The run passes only when no
// request failed, every backend was updated, and every pool kept at least its threshold of
// backends in service (serving or leaving: both take traffic) in every sample.
func (s summary) problems() []string {
	var out []string
	if s.Stopped != "" {
		out = append(out, s.Stopped)
	}
	if s.Failed > 0 {
		out = append(out, fmt.Sprintf("%d requests failed", s.Failed))
	}
	if s.Updated < s.Backends {
		out = append(out, fmt.Sprintf("only %d/%d backends updated to %s", s.Updated, s.Backends, s.NewVersion))
	}
	if s.Samples == 0 {
		out = append(out, "pollbal's state was never sampled")
	}
	for _, p := range s.Pools {
		if !poolOK(p) {
			out = append(out, fmt.Sprintf("pool %s dropped to %d in service (threshold %d)", p.Pool, p.InService, p.Threshold))
		}
	}
	return out
}

// poolOK is the pool verdict: the fewest backends in service seen is at least the threshold.
//
// In service counts leaving backends too. Strictly serving ones can drop below the threshold
// for a moment without anything going wrong: when two backends announce leaving within one
// check interval, neither saw the other's warning yet; pollbal then warns both (fewer serving
// than the threshold), both write serving back, and both keep taking traffic all along. What the protocol guarantees,
// and what the demo checks, is that the pool never loses its last backend in service.
func poolOK(p poolMin) bool { return p.InService >= p.Threshold }

// writeSummary prints the summary in lines that are easy to read and to grep: "key: value".
func writeSummary(w io.Writer, s summary) {
	fmt.Fprintf(w, "\nsummary after %.1fs:\n", s.Elapsed.Seconds())
	fmt.Fprintf(w, "  requests served: %d\n", s.Served)
	fmt.Fprintf(w, "  requests failed: %d\n", s.Failed)
	for _, f := range s.Failures {
		fmt.Fprintf(w, "    %s\n", f)
	}
	fmt.Fprintf(w, "  backends updated: %d/%d on %s (%d round(s) each)\n", s.Updated, s.Backends, s.NewVersion, s.Rounds)
	for _, n := range s.NotUpdated {
		fmt.Fprintf(w, "    %s\n", n)
	}
	fmt.Fprintf(w, "  warnings received: %d (update attempts postponed: %d)\n", s.Warnings, s.StartOvers)
	for _, p := range s.Pools {
		verdict := "ok"
		if !poolOK(p) {
			verdict = "BELOW THRESHOLD"
		}
		fmt.Fprintf(w, "  min in service %s: %d (threshold %d) %s; fewest strictly serving: %d (%d leaving then)\n",
			p.Pool, p.InService, p.Threshold, verdict, p.Serving, p.LeavingAtMin)
	}
	fmt.Fprintf(w, "  state samples: %d (%d failed)\n", s.Samples, s.SampleFailures)
	if probs := s.problems(); len(probs) > 0 {
		fmt.Fprintln(w, "result: FAILED")
		for _, p := range probs {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		return
	}
	fmt.Fprintln(w, "result: ok")
}
