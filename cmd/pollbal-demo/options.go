package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"pollbal/internal/cmdline"
)

// timings are the update script's durations, in seconds, and the update command's duration.
type timings struct {
	Name         string
	Jitter       float64
	LockWindow   float64
	AnnounceWait float64
	DrainWait    float64
	Update       float64
}

// timingsFor returns a -timings choice: fast for tests, normal for people watching (the
// whole demo stays around a minute).
func timingsFor(name string) (timings, bool) {
	switch name {
	case "fast":
		return timings{Name: name, Jitter: 2, LockWindow: 1, AnnounceWait: 1, DrainWait: 0.5, Update: 0.5}, true
	case "normal":
		return timings{Name: name, Jitter: 6, LockWindow: 3, AnnounceWait: 3, DrainWait: 1, Update: 2}, true
	}
	return timings{}, false
}

// Values of -warning-scope.
const (
	scopeService = "service" // rewrite the demo config's services to warning_scope: service
	scopeConfig  = "config"  // keep what the shipped config says
)

// options are the parsed command line.
type options struct {
	Pollbal         string
	Backend         string
	UpdateScript    string
	Rounds          int
	Timings         timings
	Quiet           bool
	PortsFromConfig bool
	PortOffset      int
	WarningScope    string
	Rate            int
	Timeout         time.Duration
	// ViaMake: run by `make demo` (DEMO_VIA_MAKE=1), whose user passes flags in DEMO_FLAGS.
	ViaMake bool
}

// parseOptions parses args; getenv is consulted for DEMO_ROUNDS, which overrides -rounds so
// that `DEMO_ROUNDS=3 make demo` works without editing the Makefile, and for DEMO_VIA_MAKE,
// which the Makefile sets so that advice names DEMO_FLAGS.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := cmdline.NewFlagSet("demo", stderr)
	fs.StringVar(&o.Pollbal, "pollbal", "bin/pollbal", "pollbal binary")
	fs.StringVar(&o.Backend, "backend", "bin/example-backend", "example backend binary (internal/testbackend)")
	fs.StringVar(&o.UpdateScript, "update-script", "scripts/pollbal-update.sh", "the rolling-update script run on every backend")
	fs.IntVar(&o.Rounds, "rounds", 1, "updates per backend (--rounds of the update script); env DEMO_ROUNDS overrides")
	timingName := fs.String("timings", "normal", "script timings: fast (tests) or normal (people)")
	fs.BoolVar(&o.Quiet, "quiet", false, "never redraw the live view; print plain status blocks instead")
	fs.BoolVar(&o.PortsFromConfig, "ports-from-config", true, "use the demo config's ports (shifted by -port-offset); false picks free ports")
	fs.IntVar(&o.PortOffset, "port-offset", 0, "added to every port of the demo config (pollbal listen and admin, backends)")
	fs.StringVar(&o.WarningScope, "warning-scope", scopeConfig,
		"config: keep the embedded config's warning_scope (service); service: force warning_scope service")
	fs.IntVar(&o.Rate, "rate", 20, "client requests per second sent through pollbal")
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "stop and fail when the update has not finished by then")
	if err := cmdline.Parse(fs, args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) {
		return o, cmdline.Refuse(fs, format, a...)
	}
	if v := getenv("DEMO_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return bad("DEMO_ROUNDS=%q: want a whole number", v)
		}
		o.Rounds = n
	}
	o.ViaMake = getenv("DEMO_VIA_MAKE") == "1"
	if o.Rounds < 1 {
		return bad("rounds must be at least 1, got %d", o.Rounds)
	}
	t, ok := timingsFor(*timingName)
	if !ok {
		return bad("-timings %q: want fast or normal", *timingName)
	}
	o.Timings = t
	if o.PortOffset < 0 || o.PortOffset > 40000 {
		return bad("-port-offset %d: want 0..40000", o.PortOffset)
	}
	if !o.PortsFromConfig && o.PortOffset != 0 {
		return bad("-port-offset shifts the config's ports; it cannot be used with -ports-from-config=false")
	}
	if o.WarningScope != scopeService && o.WarningScope != scopeConfig {
		return bad("-warning-scope %q: want service or config", o.WarningScope)
	}
	if o.Rate < 1 || o.Rate > 1000 {
		return bad("-rate %d: want 1..1000", o.Rate)
	}
	if o.Timeout <= 0 {
		return bad("-timeout must be positive")
	}
	return o, nil
}

// flagAdvice says how to pass the demo flags: as they are, or through make's DEMO_FLAGS.
func flagAdvice(flags string, viaMake bool) string {
	if viaMake {
		return fmt.Sprintf("make demo DEMO_FLAGS=%q", flags)
	}
	return flags
}

// seconds formats a duration in seconds the way the update script reads it.
func seconds(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) }
