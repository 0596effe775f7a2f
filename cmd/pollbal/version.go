package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"pollbal/internal/cmdline"
)

// version and commit are stamped by `make build` and `make release`:
// -ldflags "-X main.version=v0.9.0 -X main.commit=abc1234".
var (
	version = "dev"
	commit  = ""
)

// build says what this binary is.
type build struct {
	version, commit, goVersion string
}

// buildVersion returns the stamped version and commit. A binary built without them (go build,
// go install) takes its module's version when it has one (go install pollbal@v0.9.0) and the
// commit its toolchain recorded (vcs.revision, with -dirty for modified sources); else "dev"
// and "unknown".
func buildVersion() build {
	b := build{version: version, commit: commit, goVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = &debug.BuildInfo{}
	}
	return fillBuild(b, info)
}

// fillBuild fills what b lacks from the build information the Go toolchain recorded.
func fillBuild(b build, info *debug.BuildInfo) build {
	if b.version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.version = info.Main.Version
	}
	if b.commit == "" {
		var revision, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		b.commit = "unknown"
		if revision != "" {
			b.commit = revision[:min(len(revision), 7)]
			if modified == "true" {
				b.commit += "-dirty"
			}
		}
	}
	return b
}

// String is what `pollbal version` prints: pollbal v0.9.0 (commit abc1234, go1.26.8).
func (b build) String() string {
	return fmt.Sprintf("pollbal %s (commit %s, %s)", b.version, b.commit, b.goVersion)
}

// printVersion runs `pollbal version`.
func printVersion(args []string, stdout, stderr io.Writer) int {
	if err := parseArgs(versionCommand(), args, stdout, stderr); err != nil {
		return cmdline.ExitCode(err)
	}
	fmt.Fprintln(stdout, buildVersion())
	return 0
}
