package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"pollbal/internal/testbackend/api"
)

// view draws the live view until ctx ends, then draws one last frame: in place on a
// terminal, otherwise as plain blocks printed only when something other than the counters
// changed.
func (d *demo) view(ctx context.Context, start time.Time, ld *load, mon *monitor, scripts []runningScript) {
	tick := time.NewTicker(frameEvery)
	defer tick.Stop()
	drawn := 0 // lines of the frame on screen (terminal)
	lastKey, lastPlain := "", time.Time{}
	for {
		final := false
		select {
		case <-ctx.Done():
			final = true
		case <-tick.C:
		}
		v := d.frame(start, ld, mon, scripts)
		lines := renderView(v)
		switch {
		case d.tty:
			var b strings.Builder
			if drawn > 0 {
				fmt.Fprintf(&b, ansiUp, drawn)
				b.WriteString(ansiClearDown)
			}
			for _, l := range lines {
				if r := []rune(l); d.width > 1 && len(r) >= d.width {
					l = string(r[:d.width-1])
				}
				b.WriteString(l + ansiClearLine + "\n")
			}
			_, _ = io.WriteString(d.out, b.String())
			drawn = len(lines)
		default:
			key := viewKey(v)
			if final || (key != lastKey && time.Since(lastPlain) >= plainEvery) {
				_, _ = io.WriteString(d.out, strings.Join(lines, "\n")+"\n")
				lastKey, lastPlain = key, time.Now()
			}
		}
		if final {
			return
		}
	}
}

// frame gathers one frame: pollbal's latest state, each backend's stats, each script's step.
func (d *demo) frame(start time.Time, ld *load, mon *monitor, scripts []runningScript) viewData {
	stats := map[string]*api.Stats{}
	steps := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), frameEvery/2)
	defer cancel()
	for _, b := range d.plan.Backends {
		var st api.Stats
		if err := getJSON(ctx, d.http, "http://"+b.Address+"/_backend/stats", &st); err == nil {
			stats[b.ID] = &st
		}
	}
	for _, s := range scripts {
		step := scriptStep(s.child.log.last())
		if s.child.exit.IsSet() {
			step = fmt.Sprintf("exited %d: %s", s.child.exitCode(), step)
		}
		steps[s.id] = step
	}
	state := mon.state()
	served, failed := ld.counts()
	v := viewData{
		Elapsed: time.Since(start), Served: served, Failed: failed,
		Rows:  rowsFrom(d.plan, state, stats, steps),
		Pools: d.plan.Pools, Threshold: d.plan.Threshold,
	}
	if state != nil {
		v.Counts = countPools(*state, d.plan.Service, d.plan.Pools)
	}
	return v
}
