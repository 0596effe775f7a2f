package main

// Rolling-update protection end to end (SPEC §5): real pollbal instances, real example backends
// and the real scripts/pollbal-update.sh on every backend, all started at the same moment.

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

const (
	rollingInterval = 200 * time.Millisecond
	rollingTimeout  = 150 * time.Millisecond
	// rollingFall: no backend stops in these tests (the update command is a sleep), so a failed
	// check only says the loaded machine stalled (five of six backends timed out in the same
	// millisecond, and site eu saw none in rotation). Three in a row (600 ms) are needed before a
	// backend leaves the rotation.
	rollingFall      = 3
	rollingThreshold = 2
	rollingScript    = "../../scripts/pollbal-update.sh"
	// rollingDeadline bounds one whole rolling update, so a protection that never lets go fails
	// the test instead of hanging it.
	rollingDeadline = 90 * time.Second
	// heldSamples is how many consecutive samples (3 s) the held-back backends must stay warned:
	// longer than the script's lock window plus announce wait, and longer than its jitter, so
	// every held script tries to leave (and is postponed) at least once while watched.
	heldSamples = 15
	// rollingMaxDip bounds how long a site may see fewer than the threshold serving: when
	// several backends announce leaving within one warning round trip (poll, round end, POST),
	// the leaving ones are warned too and write serving back at the end of their announce wait
	// (1.5 s). One second of slack covers the poll and sampling lag.
	rollingMaxDip = 2500 * time.Millisecond
)

// rollingConfig is one site's configuration: every backend in the default pool, one app "*",
// service web with warning_threshold 2 in the given scope.
func rollingConfig(site, scope string, bs []*backend) string {
	var b strings.Builder
	fmt.Fprintf(&b, `site: %s
listen: LISTEN
admin:
  listen: ADMIN
poll:
  interval: %s
  timeout: %s
  fall: %d
  max_backoff: 400ms
services:
  web:
    warning_threshold: %d
    warning_scope: %s
apps:
  - name: www
    hosts: ["*"]
backends:
`, site, rollingInterval, rollingTimeout, rollingFall, rollingThreshold, scope)
	for _, be := range bs {
		fmt.Fprintf(&b, "  - id: %s\n    address: %s\n    capacity: 8\n", be.id, be.addr)
	}
	return b.String()
}

// startRollingBackends starts n example backends that serve "web serving <version>".
func startRollingBackends(t *testing.T, n int, version string) []*backend {
	t.Helper()
	var bs []*backend
	for i := 1; i <= n; i++ {
		bs = append(bs, startBackend(t, fmt.Sprintf("web-%d", i), "127.0.0.1:0", "web serving "+version+"\n"))
	}
	return bs
}

// waitAllReport waits until every site sees every backend ready and reporting exactly want
// (e.g. "web serving v1").
func waitAllReport(t *testing.T, sites []*instance, bs []*backend, want string) {
	t.Helper()
	testproc.WaitFor(t, 10*time.Second, "every site sees every backend report "+want, func() bool {
		for _, in := range sites {
			s := in.state(t)
			for _, b := range bs {
				if ready, _, reports, _ := s.backend(b.id); !ready || reports != want {
					return false
				}
			}
		}
		return true
	})
}

// startUpdate runs the real update script for b once (--rounds 1) with the SPEC §5 timings
// scaled down about tenfold and an update command that takes about a second.
func startUpdate(t *testing.T, b *backend, from, to, jitter string) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, "update "+b.id, testproc.Options{}, rollingScript,
		"--pool-file", b.poolFile, "--lock-file", b.lockFile,
		"--service", "web", "--version", from, "--new-version", to,
		"--update-cmd", "sleep 1",
		"--jitter", jitter, "--lock-window", "1", "--announce-wait", "1.5", "--drain-wait", "0.5",
		"--rounds", "1")
}

// siteView is what one /api/state sample says about service web.
type siteView struct {
	serving    int      // ready backends reporting web serving
	inRotation int      // ready backends reporting web serving or leaving (scheduling candidates)
	warned     []string // backends marked warned
	summary    string   // one line per backend, for failure messages
}

func viewOf(s apiState) siteView {
	var v siteView
	var lines []string
	for _, b := range s.Backends {
		if b.Warned {
			v.warned = append(v.warned, b.ID)
		}
		report := "-"
		for _, r := range b.Reports {
			if r.Service != "web" {
				continue
			}
			report = r.Status + " " + r.Version
			if !b.Ready {
				continue
			}
			switch r.Status {
			case "serving":
				v.serving++
				v.inRotation++
			case "leaving":
				v.inRotation++
			}
		}
		lines = append(lines, fmt.Sprintf("%s ready=%t warned=%t web=%s", b.ID, b.Ready, b.Warned, report))
	}
	v.summary = strings.Join(lines, "; ")
	return v
}

// siteTally folds one site's samples.
type siteTally struct {
	site                      string
	samples, warnedSamples    int
	minServing, minInRotation int
	lowest                    string // the sample with the fewest backends in rotation

	// A dip is a run of samples with fewer than the threshold serving: several backends
	// announced leaving within one warning round trip, and the warnings sent them back.
	dips       int
	dipStart   time.Time // zero when not in a dip
	longestDip time.Duration
}

func (st *siteTally) add(v siteView, at time.Time) {
	if st.samples == 0 || v.serving < st.minServing {
		st.minServing = v.serving
	}
	if st.samples == 0 || v.inRotation < st.minInRotation {
		st.minInRotation = v.inRotation
		st.lowest = v.summary
	}
	st.samples++
	if len(v.warned) > 0 {
		st.warnedSamples++
	}
	switch {
	case v.serving < rollingThreshold && st.dipStart.IsZero():
		st.dips++
		st.dipStart = at
	case v.serving >= rollingThreshold && !st.dipStart.IsZero():
		st.longestDip = max(st.longestDip, at.Sub(st.dipStart))
		st.dipStart = time.Time{}
	}
}

// watchRolling samples every site's state once per interval until every script has exited, and
// returns one tally per site. It fails the test when the scripts run past rollingDeadline.
func watchRolling(t *testing.T, sites []*instance, scripts []*testproc.Proc) []siteTally {
	t.Helper()
	allDone := make(chan struct{})
	go func() {
		for _, p := range scripts {
			<-p.Done()
		}
		close(allDone)
	}()
	tallies := make([]siteTally, len(sites))
	for i, in := range sites {
		tallies[i].site = in.state(t).Site
	}
	tick := time.NewTicker(rollingInterval)
	defer tick.Stop()
	deadline := time.NewTimer(rollingDeadline)
	defer deadline.Stop()
	for {
		for i, in := range sites {
			tallies[i].add(viewOf(in.state(t)), time.Now())
		}
		select {
		case <-allDone:
			for i := range tallies {
				if st := &tallies[i]; !st.dipStart.IsZero() {
					st.longestDip = max(st.longestDip, time.Since(st.dipStart))
				}
			}
			return tallies
		case <-deadline.C:
			t.Fatalf("update scripts still running after %s", rollingDeadline)
		case <-tick.C:
		}
	}
}

// postponements counts how often a script's log says a pool warning made it start over.
func postponements(scripts []*testproc.Proc) int {
	n := 0
	for _, p := range scripts {
		n += strings.Count(p.Output(), "starting over")
	}
	return n
}

// TestRollingUpdateTwoSites runs the real update script on six backends at once behind two
// pollbal instances (two sites) and checks, in every sample of each site's state:
//   - never fewer than warning_threshold backends in rotation (serving or leaving: a leaving
//     backend still takes traffic, SPEC §4), i.e. the protection never let too many go down;
//   - fewer than the threshold *serving* only briefly: the protocol cannot stop backends that
//     announce leaving within one warning round trip of each other, but it warns them all
//     (|Sv| < T) and they write serving back at the end of their announce wait.
//
// It also checks that warnings really happened (not a vacuous run) and that every script
// exited 0 with its backend serving the expected version.
func TestRollingUpdateTwoSites(t *testing.T) {
	cases := []struct {
		name     string
		scope    string
		from, to string
	}{
		{name: "scope version, update keeps v1", scope: "version", from: "v1", to: "v1"},
		{name: "scope service, update bumps v1 to v2", scope: "service", from: "v1", to: "v2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bs := startRollingBackends(t, 6, tc.from)
			sites := []*instance{
				startPollbal(t, rollingConfig("eu", tc.scope, bs)),
				startPollbal(t, rollingConfig("us", tc.scope, bs)),
			}
			waitAllReport(t, sites, bs, "web serving "+tc.from)

			began := time.Now()
			var scripts []*testproc.Proc
			for _, b := range bs {
				scripts = append(scripts, startUpdate(t, b, tc.from, tc.to, "3"))
			}
			tallies := watchRolling(t, sites, scripts)
			took := time.Since(began)

			for i, p := range scripts {
				if code := p.ExitCode(t, time.Second); code != 0 {
					t.Errorf("update script on %s exited %d, want 0:\n%s", bs[i].id, code, p.Output())
				}
			}
			want := "web serving " + tc.to
			for _, b := range bs {
				got, err := os.ReadFile(b.poolFile)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want+"\n" {
					t.Errorf("%s pool file = %q, want %q", b.id, got, want+"\n")
				}
			}
			waitAllReport(t, sites, bs, want)

			var warnings int64
			for _, b := range bs {
				warnings += b.stats(t).Warnings
			}
			for _, st := range tallies {
				t.Logf("site %s: %d samples; min serving+leaving %d; min serving %d in %d dip(s), longest %s; %d samples with a warned backend",
					st.site, st.samples, st.minInRotation, st.minServing, st.dips, st.longestDip.Round(time.Millisecond), st.warnedSamples)
				if st.minInRotation < rollingThreshold {
					t.Errorf("site %s saw %d backends in rotation (serving or leaving), below threshold %d: %s",
						st.site, st.minInRotation, rollingThreshold, st.lowest)
				}
				if st.longestDip > rollingMaxDip {
					t.Errorf("site %s saw fewer than %d backends serving for %s, want at most %s (the leaving ones are warned back)",
						st.site, rollingThreshold, st.longestDip, rollingMaxDip)
				}
				if st.warnedSamples == 0 {
					t.Errorf("vacuous run: no sample at site %s showed a warned backend", st.site)
				}
			}
			t.Logf("update took %s; %d warnings received; %d postponements", took.Round(time.Millisecond),
				warnings, postponements(scripts))
			if warnings == 0 {
				t.Errorf("vacuous run: the backends received no warnings")
			}
		})
	}
}

// TestVersionScopeHoldsBackOldVersion documents the limit of warning_scope: version: with four
// backends on v1, threshold 2 and a bump to v2, two backends move to v2, and then the last two
// of v1 are a group of exactly T serving, so they are warned on every interval and never leave.
// Stopping their scripts with SIGTERM leaves them serving v1.
func TestVersionScopeHoldsBackOldVersion(t *testing.T) {
	bs := startRollingBackends(t, 4, "v1")
	in := startPollbal(t, rollingConfig("eu", "version", bs))
	sites := []*instance{in}
	waitAllReport(t, sites, bs, "web serving v1")

	scripts := make(map[string]*testproc.Proc)
	for _, b := range bs {
		scripts[b.id] = startUpdate(t, b, "v1", "v2", "2")
	}

	var held []*backend
	var heldScripts []*testproc.Proc
	var heldWarnings int64 // warnings received by the held backends when the hold began
	heldPostponed := 0     // times their scripts had started over when the hold began
	streak, announced := 0, 0
	tick := time.NewTicker(rollingInterval)
	defer tick.Stop()
	deadline := time.NewTimer(rollingDeadline)
	defer deadline.Stop()
	for streak < heldSamples {
		s := in.state(t)
		var moved, onV1 []*backend
		for _, b := range bs {
			ready, _, reports, _ := s.backend(b.id)
			switch {
			case ready && reports == "web serving v2":
				moved = append(moved, b)
			case ready && reports == "web serving v1":
				onV1 = append(onV1, b)
			}
		}
		if len(moved) > rollingThreshold {
			t.Fatalf("%d backends moved to v2; the last %d of v1 should have been held back: %s",
				len(moved), rollingThreshold, viewOf(s).summary)
		}
		if held == nil && len(moved) == rollingThreshold && len(onV1) == rollingThreshold {
			held = onV1
			for _, b := range held {
				heldWarnings += b.stats(t).Warnings
				heldScripts = append(heldScripts, scripts[b.id])
			}
			heldPostponed = postponements(heldScripts)
			t.Logf("hold began: %s", viewOf(s).summary)
		}
		if held != nil {
			warnedAll := true
			for _, b := range held {
				select {
				case <-scripts[b.id].Done():
					t.Fatalf("update script on held-back %s exited:\n%s", b.id, scripts[b.id].Output())
				default:
				}
				ready, _, reports, _ := s.backend(b.id)
				switch {
				case !ready:
					// A missed poll says nothing either way.
					warnedAll = false
				case reports == "web leaving v1":
					// Announced within one warning round trip; it is warned and writes serving back.
					announced++
					warnedAll = false
				case reports != "web serving v1":
					t.Fatalf("held-back %s went out of v1 (%q): %s", b.id, reports, viewOf(s).summary)
				case !slices.Contains(viewOf(s).warned, b.id):
					warnedAll = false
				}
			}
			if warnedAll {
				streak++
			} else {
				streak = 0
			}
		}
		select {
		case <-deadline.C:
			t.Fatalf("no hold of %d consecutive warned samples within %s (streak %d, held %d)",
				heldSamples, rollingDeadline, streak, len(held))
		case <-tick.C:
		}
	}

	var nowWarnings int64
	for _, b := range held {
		nowWarnings += b.stats(t).Warnings
	}
	postponed := postponements(heldScripts) - heldPostponed
	t.Logf("held-back backends warned in %d consecutive samples; during the hold: %d warnings received, %d postponements, %d samples showed one announcing leaving",
		streak, nowWarnings-heldWarnings, postponed, announced)
	if nowWarnings <= heldWarnings || postponed == 0 {
		t.Fatalf("held-back backends were not kept back during the hold: %d warnings received, %d postponements; want both > 0",
			nowWarnings-heldWarnings, postponed)
	}

	for _, b := range bs {
		p := scripts[b.id]
		if !slices.Contains(held, b) {
			if code := p.ExitCode(t, 5*time.Second); code != 0 {
				t.Errorf("update script on %s exited %d, want 0:\n%s", b.id, code, p.Output())
			}
			continue
		}
		p.Signal(t, syscall.SIGTERM)
		if code := p.ExitCode(t, 10*time.Second); code != 0 {
			t.Errorf("update script on %s exited %d after SIGTERM, want 0:\n%s", b.id, code, p.Output())
		}
		if got, err := os.ReadFile(b.poolFile); err != nil || string(got) != "web serving v1\n" {
			t.Errorf("%s pool file after SIGTERM = %q (%v), want %q", b.id, got, err, "web serving v1\n")
		}
		if strings.Contains(p.Output(), "emptied pool file") {
			t.Errorf("held-back %s went out of rotation:\n%s", b.id, p.Output())
		}
	}
	waitAllReport(t, sites, held, "web serving v1")
}
