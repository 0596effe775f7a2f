package main

import "strings"

// awakeSysmon is the GODEBUG setting that keeps the Go runtime's system monitor out of its
// deep sleep. When every P is idle, the monitor sleeps until a goroutine's next system call
// wakes it (a futex wake and a context switch); it then polls every 20 µs until all Ps are idle
// again. A proxy at a moderate rate goes idle between most requests, so it pays that cycle
// for most of them. The runtime skips the deep sleep while schedtrace is set; at the largest
// value it allows (2^31-1 ms, about 24.8 days) the monitor backs off to one wake per 10 ms
// when idle instead, and prints its one-line scheduler summary only once that much time has
// passed since the host booted, and then once per period.
const awakeSysmon = "schedtrace=2147483647"

// withAwakeSysmon returns env with awakeSysmon added to GODEBUG, and false when GODEBUG
// already sets schedtrace: the operator's own choice (schedtrace=0 keeps the runtime's
// default), or this process once re-executed with it.
func withAwakeSysmon(env []string) ([]string, bool) {
	at := -1
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		at = i
		for _, field := range strings.Split(v, ",") {
			if key, _, _ := strings.Cut(field, "="); strings.TrimSpace(key) == "schedtrace" {
				return env, false
			}
		}
	}
	out := append([]string(nil), env...)
	if at < 0 {
		return append(out, "GODEBUG="+awakeSysmon), true
	}
	if out[at] == "GODEBUG=" {
		out[at] += awakeSysmon
	} else {
		out[at] += "," + awakeSysmon
	}
	return out, true
}
