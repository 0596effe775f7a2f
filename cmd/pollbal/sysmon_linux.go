package main

import (
	"os"
	"syscall"
)

// keepSysmonAwake re-executes this binary with awakeSysmon in GODEBUG, which the runtime reads
// only at start. It is called first thing in main, before any descriptor is opened, so the
// process keeps its pid, arguments, environment and inherited descriptors (a binary upgrade's
// listeners). It executes the binary's own path, not /proc/self/exe, so that the process keeps
// its name too. If that fails, pollbal runs on with the runtime's default.
func keepSysmonAwake() {
	env, ok := withAwakeSysmon(os.Environ())
	if !ok {
		return
	}
	if exe, err := os.Executable(); err == nil {
		_ = syscall.Exec(exe, os.Args, env)
	}
}
