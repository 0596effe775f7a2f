package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"pollbal/internal/testbackend/api"
)

// Versions the demo updates from and to.
const (
	fromVersion = "v1"
	toVersion   = "v2"
)

// Pacing of the run.
const (
	sampleEvery   = 100 * time.Millisecond // /api/state samples for the minimums
	frameEvery    = 500 * time.Millisecond // live view frames
	plainEvery    = time.Second            // at most one plain-text block per this
	startTimeout  = 20 * time.Second       // each of: backends up, pollbal ready, all serving
	settleTimeout = 10 * time.Second       // after the scripts: pollbal shows the new version
	stopGrace     = 10 * time.Second       // SIGTERM to SIGKILL
	logLines      = 20                     // lines of a child's output kept for errors
)

// demo is one run of the demo. It is not safe for concurrent use.
type demo struct {
	o     options
	out   io.Writer
	tty   bool // redraw the live view in place
	width int  // terminal columns when tty

	dir     string
	plan    plan
	http    *http.Client // state, stats, readiness
	cleanup []func()     // run in reverse order
}

// runningScript is one backend's update script.
type runningScript struct {
	id    string
	child *child
}

// Run sets everything up, runs the rolling update under load, tears everything down and
// returns the outcome. An error means the demo could not run at all.
func (d *demo) Run(ctx context.Context) (summary, error) {
	start := time.Now()
	defer func() {
		for i := len(d.cleanup) - 1; i >= 0; i-- {
			d.cleanup[i]()
		}
	}()
	dir, err := os.MkdirTemp("", "pollbal-demo-")
	if err != nil {
		return summary{}, fmt.Errorf("temp dir: %w", err)
	}
	d.dir = dir
	d.cleanup = append(d.cleanup, func() { _ = os.RemoveAll(dir) })
	transport := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}
	d.cleanup = append(d.cleanup, transport.CloseIdleConnections)
	d.http = &http.Client{Transport: transport, Timeout: 2 * time.Second}

	bins, err := d.binaries()
	if err != nil {
		return summary{}, err
	}
	cfgPath, err := d.writeConfig()
	if err != nil {
		return summary{}, err
	}
	if err := d.startBackends(ctx, bins.backend); err != nil {
		return summary{}, err
	}
	pollbal, err := d.startPollbal(ctx, bins.pollbal, cfgPath)
	if err != nil {
		return summary{}, err
	}
	d.intro()
	return d.update(ctx, start, bins.script, pollbal)
}

// intro tells the user where to look.
func (d *demo) intro() {
	p, t := d.plan, d.o.Timings
	fmt.Fprintf(d.out, "pollbal demo: site %s, %d backends in pools %s, threshold %d serving per pool\n",
		p.Site, len(p.Backends), strings.Join(p.Pools, " and "), p.Threshold)
	fmt.Fprintf(d.out, "  status page: http://%s/\n", p.Admin)
	fmt.Fprintf(d.out, "  proxy:       http://%s/   try: curl -H 'Host: %s' http://%s/\n", p.Proxy, p.Hosts[0], p.Proxy)
	var backends []string
	for _, b := range p.Backends {
		backends = append(backends, b.ID+"="+b.Address)
	}
	fmt.Fprintf(d.out, "  backends:    %s\n", strings.Join(backends, " "))
	fmt.Fprintf(d.out, "  files:       %s (removed at the end)\n", d.dir)
	fmt.Fprintf(d.out, "rolling update %s -> %s on every backend at once, %d round(s); %d req/s through pollbal (Host %s)\n",
		fromVersion, toVersion, d.o.Rounds, d.o.Rate, strings.Join(p.Hosts, ", "))
	fmt.Fprintf(d.out, "  timings %s: jitter %ss, lock window %ss, announce %ss, drain %ss, update %ss. Ctrl-C stops everything.\n\n",
		t.Name, seconds(t.Jitter), seconds(t.LockWindow), seconds(t.AnnounceWait), seconds(t.DrainWait), seconds(t.Update))
}

// update runs the load, the monitor, the live view and the update scripts until every script
// has exited (or the demo is stopped), then stops them and returns the summary.
func (d *demo) update(ctx context.Context, start time.Time, script string, pollbal *child) (summary, error) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return summary{}, fmt.Errorf("the update script needs bash: %w", err)
	}
	runStart := time.Now()
	loadTransport := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	defer loadTransport.CloseIdleConnections()
	ld := newLoad(&http.Client{Transport: loadTransport, Timeout: 10 * time.Second}, d.plan.Proxy, d.plan.Hosts, d.o.Rate, runStart)
	mon := newMonitor(d.http, d.plan.Admin, sampleEvery, newTracker(d.plan.Service, d.plan.Threshold, d.plan.Pools))

	monBG := background(func(ctx context.Context) { _ = mon.Run(ctx) })
	defer monBG.stop()
	loadBG := background(func(ctx context.Context) { _ = ld.Run(ctx) })
	defer loadBG.stop()

	var startOvers atomic.Int64
	scripts, err := d.startScripts(bash, script, func(line string) {
		if strings.Contains(line, "starting over") {
			startOvers.Add(1)
		}
	})
	if err != nil {
		return summary{}, err
	}
	viewBG := background(func(ctx context.Context) { d.view(ctx, runStart, ld, mon, scripts) })
	defer viewBG.stop()

	stopped := d.awaitScripts(ctx, mon, scripts, pollbal)

	// Traffic first, so that every request it sent is answered before anything stops; then one
	// last sample with the load finished, then the view's last frame.
	loadBG.stop()
	monBG.stop()
	mon.sample(context.Background())
	viewBG.stop()
	if stopped != "" {
		fmt.Fprintf(d.out, "stopping: %s\n", stopped)
	}
	ends := stopScripts(scripts)

	served, failed := ld.counts()
	mins, samples, sampleFailures := mon.result()
	sum := summary{
		Elapsed: time.Since(start), Stopped: stopped, Served: served, Failed: failed, Failures: ld.failures(),
		Backends: len(scripts), NewVersion: toVersion, Rounds: d.o.Rounds,
		Pools: mins, Samples: samples, SampleFailures: sampleFailures, StartOvers: int(startOvers.Load()),
		Warnings: d.warningsReceived(scripts),
	}
	final := mon.state()
	for _, e := range ends {
		if why := notUpdated(e, final, d.plan.Service); why == "" {
			sum.Updated++
		} else {
			sum.NotUpdated = append(sum.NotUpdated, e.id+": "+why)
		}
	}
	return sum, nil
}

// startScripts starts one update script per backend; count sees every line they print.
func (d *demo) startScripts(bash, script string, count func(line string)) ([]runningScript, error) {
	t := d.o.Timings
	scripts := make([]runningScript, 0, len(d.plan.Backends))
	for _, b := range d.plan.Backends {
		c, err := d.start(b.ID+"-update", bash, []string{script,
			"--pool-file", d.poolFile(b.ID), "--lock-file", d.lockFile(b.ID), "--service", d.plan.Service,
			"--version", fromVersion, "--new-version", toVersion, "--update-cmd", "sleep " + seconds(t.Update),
			"--jitter", seconds(t.Jitter), "--lock-window", seconds(t.LockWindow),
			"--announce-wait", seconds(t.AnnounceWait), "--drain-wait", seconds(t.DrainWait),
			"--rounds", fmt.Sprint(d.o.Rounds),
		}, count)
		if err != nil {
			return nil, err
		}
		scripts = append(scripts, runningScript{id: b.ID, child: c})
	}
	return scripts, nil
}

// awaitScripts waits until every script has exited and pollbal shows the last pool file
// change, or the run ends early. It returns why the run ended early, or "".
func (d *demo) awaitScripts(ctx context.Context, mon *monitor, scripts []runningScript, pollbal *child) string {
	allDone := make(chan struct{})
	go func() {
		for _, s := range scripts {
			<-s.child.exit.Done()
		}
		close(allDone)
	}()
	timeout := time.NewTimer(d.o.Timeout)
	defer timeout.Stop()
	select {
	case <-allDone:
		// Give pollbal a few checks to see the last pool file change.
		_ = waitUntil(ctx, settleTimeout, sampleEvery, "", func() (bool, error) {
			s := mon.state()
			return s != nil && allOn(*s, d.plan.Service, toVersion, d.backendIDs()), nil
		})
		if ctx.Err() != nil {
			return "interrupted"
		}
		return ""
	case <-ctx.Done():
		return "interrupted"
	case <-timeout.C:
		return fmt.Sprintf("timed out after %s with update scripts still running", d.o.Timeout)
	case <-pollbal.exit.Done():
		return fmt.Sprintf("pollbal exited with status %d:\n%s", pollbal.exitCode(), pollbal.log.tail())
	}
}

// scriptEnd is how one update script ended.
type scriptEnd struct {
	id      string
	running bool   // still running when the run ended (then stopped)
	code    int    // exit code; -1 when a signal ended it
	last    string // the step it was on when the run ended
}

// stopScripts stops every script still running and says how each one ended.
func stopScripts(scripts []runningScript) []scriptEnd {
	ends := make([]scriptEnd, 0, len(scripts))
	for _, s := range scripts {
		e := scriptEnd{id: s.id, running: !s.child.exit.IsSet(), last: scriptStep(s.child.log.last())}
		s.child.stop(stopGrace)
		e.code = s.child.exitCode()
		ends = append(ends, e)
	}
	return ends
}

// notUpdated says why a backend does not count as updated, or "" when it does: its script
// exited 0 by itself and pollbal's last state (nil: unknown) shows it ready and serving the
// new version of service.
func notUpdated(e scriptEnd, final *apiState, service string) string {
	switch {
	case e.running:
		return "update script still running when the demo stopped (last: " + e.last + ")"
	case e.code != 0:
		return fmt.Sprintf("update script exited with status %d (last: %s)", e.code, e.last)
	case final == nil:
		return "pollbal's state is unknown"
	case !allOn(*final, service, toVersion, []string{e.id}):
		return "pollbal does not show it ready and serving " + toVersion
	}
	return ""
}

// warningsReceived sums the POST /pool_warning requests every backend says it received; a
// backend that does not answer counts none.
func (d *demo) warningsReceived(scripts []runningScript) int64 {
	var n int64
	for _, s := range scripts {
		var st api.Stats
		if err := getJSON(context.Background(), d.http, "http://"+d.address(s.id)+"/_backend/stats", &st); err == nil {
			n += st.Warnings
		}
	}
	return n
}

func (d *demo) address(id string) string {
	for _, b := range d.plan.Backends {
		if b.ID == id {
			return b.Address
		}
	}
	return ""
}
