package main

import (
	"fmt"
	"strings"
	"time"

	"pollbal/internal/testbackend/api"
)

// maxScriptWidth bounds the script column so that a frame's lines do not wrap on an
// ordinary terminal, which would break redrawing in place.
const maxScriptWidth = 56

// viewRow is one backend's line of the live view.
type viewRow struct {
	ID, Pool string
	// Status is serving or leaving from pollbal's state, "out" when the backend is ready but
	// reports nothing (out of rotation), "down" when pollbal finds it not ready, "?" before
	// pollbal answered.
	Status   string
	Version  string
	Warned   bool
	InFlight int64 // pollbal's leases on the backend
	Requests int64 // requests the backend answered; -1 when unknown
	Script   string
}

// viewData is everything one frame of the live view shows.
type viewData struct {
	Elapsed        time.Duration
	Served, Failed int64
	Rows           []viewRow
	Pools          []string
	Counts         map[string]poolCount
	Threshold      int
}

// rowsFrom builds the backend rows from pollbal's state, the backends' stats (nil entries
// are unknown) and the scripts' last log lines, in plan order.
func rowsFrom(p plan, s *apiState, stats map[string]*api.Stats, scripts map[string]string) []viewRow {
	rows := make([]viewRow, 0, len(p.Backends))
	for _, pb := range p.Backends {
		r := viewRow{ID: pb.ID, Pool: pb.Pool, Status: "?", Version: "-", Requests: -1, Script: scripts[pb.ID]}
		if st := stats[pb.ID]; st != nil {
			r.Requests = st.Requests
		}
		if s != nil {
			for _, b := range s.Backends {
				if b.ID != pb.ID {
					continue
				}
				r.Pool, r.Warned, r.InFlight = b.Pool, b.Warned, b.InFlight
				rep, ok := b.report(p.Service)
				switch {
				case !b.Ready:
					r.Status = "down"
				case !ok:
					r.Status = "out"
				default:
					r.Status = rep.Status
					if rep.Version != "" {
						r.Version = rep.Version
					}
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// renderView returns the frame's lines; every frame of a run has the same number of lines,
// so that a terminal can redraw it in place.
func renderView(v viewData) []string {
	idW, poolW, verW := len("backend"), len("pool"), len("version")
	for _, r := range v.Rows {
		idW, poolW, verW = max(idW, len(r.ID)), max(poolW, len(r.Pool)), max(verW, len(r.Version))
	}
	lines := []string{
		fmt.Sprintf("t+%5.1fs  requests served %d  failed %d", v.Elapsed.Seconds(), v.Served, v.Failed),
		fmt.Sprintf("  %-*s  %-*s  %-7s  %-*s  %-6s  %9s  %8s  %s",
			idW, "backend", poolW, "pool", "status", verW, "version", "warned", "in-flight", "requests", "update script"),
	}
	for _, r := range v.Rows {
		warned, requests := "-", "?"
		if r.Warned {
			warned = "warned"
		}
		if r.Requests >= 0 {
			requests = fmt.Sprint(r.Requests)
		}
		script := r.Script
		if n := []rune(script); len(n) > maxScriptWidth {
			script = string(n[:maxScriptWidth-1]) + "…"
		}
		lines = append(lines, strings.TrimRight(fmt.Sprintf("  %-*s  %-*s  %-7s  %-*s  %-6s  %9d  %8s  %s",
			idW, r.ID, poolW, r.Pool, r.Status, verW, r.Version, warned, r.InFlight, requests, script), " "))
	}
	var pools []string
	for _, p := range v.Pools {
		c := v.Counts[p]
		pools = append(pools, fmt.Sprintf("%s %d serving + %d leaving", p, c.Serving, c.Leaving))
	}
	lines = append(lines, fmt.Sprintf("  pools: %s (threshold %d each)", strings.Join(pools, ", "), v.Threshold))
	return lines
}

// viewKey is what a plain-text view compares to decide whether a frame is worth printing:
// everything but the counters and the clock.
func viewKey(v viewData) string {
	var b strings.Builder
	for _, r := range v.Rows {
		fmt.Fprintf(&b, "%s|%s|%s|%s|%t|%s\n", r.ID, r.Pool, r.Status, r.Version, r.Warned, r.Script)
	}
	return b.String()
}

// scriptStep shortens one update script log line to its message: the script writes
// "<timestamp> pollbal-update.sh[<pid>]: <message>".
func scriptStep(line string) string {
	if _, msg, ok := strings.Cut(line, "]: "); ok {
		return msg
	}
	return line
}

// Terminal control sequences for redrawing the view in place.
const (
	ansiUp        = "\x1b[%dA" // cursor up n lines
	ansiClearDown = "\x1b[J"   // clear from the cursor to the end of the screen
	ansiClearLine = "\x1b[K"   // clear to the end of the line
)
