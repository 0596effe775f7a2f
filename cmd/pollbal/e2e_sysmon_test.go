//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pollbal/internal/testproc"
)

// procEnv is the environment of process pid, as the kernel holds it after its last exec.
func procEnv(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
}

func godebugOf(env []string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			return v, true
		}
	}
	return "", false
}

// TestRunKeepsSysmonAwake: pollbal run re-executes itself with the runtime's system monitor kept
// out of its deep sleep, keeping its pid (the one started), its name and the operator's other
// GODEBUG settings; an operator's own schedtrace is left as it is, with no re-exec.
func TestRunKeepsSysmonAwake(t *testing.T) {
	be := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	cfg := fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
services: {web: {}}
apps:
  - {name: www, hosts: ["*"]}
backends:
  - {id: web-1, address: %s}
`, be.addr)
	for _, tt := range []struct {
		name, godebug, want string
	}{
		{name: "added", godebug: "madvdontneed=1", want: "madvdontneed=1," + awakeSysmon},
		{name: "operator's own", godebug: "schedtrace=0", want: "schedtrace=0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := &instance{cfgPath: filepath.Join(t.TempDir(), "pollbal.yaml"), listen: testproc.FreeAddr(t), admin: testproc.FreeAddr(t)}
			if err := os.WriteFile(in.cfgPath, []byte(fillAddrs(cfg, in.listen, in.admin)), 0o644); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "GODEBUG="+tt.godebug)
			in.start(t, "pollbal", testproc.Options{Env: env}, "/healthz", bins.pollbal, "run", "-config", in.cfgPath)
			got, ok := godebugOf(procEnv(t, in.Pid()))
			if !ok || got != tt.want {
				t.Errorf("GODEBUG of the running pollbal = %q (set: %v), want %q", got, ok, tt.want)
			}
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", in.Pid()))
			if err != nil {
				t.Fatal(err)
			}
			if name := filepath.Base(bins.pollbal); strings.TrimSpace(string(comm)) != name[:min(len(name), 15)] {
				t.Errorf("process name %q, want %q", strings.TrimSpace(string(comm)), name)
			}
		})
	}
}
