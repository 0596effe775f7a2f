package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// sockethold passes its sockets as systemd does (descriptors 3 and 4, LISTEN_FDS,
// LISTEN_FDNAMES, LISTEN_PID equal to the program's pid), holds them while the program
// restarts on SIGHUP (a connection made meanwhile is accepted by the kernel), and stops the
// program and exits 0 on SIGTERM.
func TestSocketholdRestartsOnHeldSockets(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sockethold")
	if err := testproc.GoBuild(bin, ".", false); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "seen")
	prog := filepath.Join(dir, "prog")
	script := fmt.Sprintf("#!/bin/sh\necho \"$$ $LISTEN_PID $LISTEN_FDS $LISTEN_FDNAMES $(readlink /proc/self/fd/3) $(readlink /proc/self/fd/4)\" >>%s\nexec sleep 60\n", out)
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	proxy, admin := testproc.FreeAddr(t), testproc.FreeAddr(t)
	p := testproc.Start(t, "sockethold", testproc.Options{Stop: syscall.SIGTERM}, bin, "-listen", "proxy="+proxy, "-listen", "admin="+admin, "--", prog)
	seen := func(n int) []string {
		t.Helper()
		var lines []string
		p.WaitFor(t, 10*time.Second, fmt.Sprintf("%d starts of the program", n), func() bool {
			data, _ := os.ReadFile(out)
			lines = strings.Split(strings.TrimSpace(string(data)), "\n")
			return len(data) > 0 && len(lines) == n
		})
		f := strings.Fields(lines[n-1])
		if len(f) != 6 || f[0] != f[1] || f[2] != "2" || f[3] != "proxy:admin" || !strings.HasPrefix(f[4], "socket:") || !strings.HasPrefix(f[5], "socket:") {
			t.Fatalf("the program saw %q, want its own pid as LISTEN_PID, 2 sockets named proxy:admin on descriptors 3 and 4", lines[n-1])
		}
		return f
	}
	first := seen(1)
	if got := p.WaitLine(t, 5*time.Second, "started "); got != first[0] {
		t.Errorf("printed started %s, the program's pid is %s", got, first[0])
	}

	p.Signal(t, syscall.SIGHUP)
	second := seen(2)
	if second[0] == first[0] || second[4] != first[4] {
		t.Errorf("after SIGHUP: pid %s socket %s, want a new pid on the same socket as %v", second[0], second[4], first)
	}
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		t.Fatalf("the held socket refused a connection: %v", err)
	}
	c.Close()

	p.Signal(t, syscall.SIGTERM)
	if code := p.ExitCode(t, 10*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

func TestSocketholdRefusesOtherAddresses(t *testing.T) {
	var stderr strings.Builder
	if code := run([]string{"-listen", "proxy=192.0.2.1:80", "--", "true"}, &strings.Builder{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "non-loopback") {
		t.Errorf("exit %d, %q; want 2 refusing a non-loopback address", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"-listen", "127.0.0.1:80", "--", "true"}, &strings.Builder{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "NAME=HOST:PORT") {
		t.Errorf("exit %d, %q; want 2 for a socket without a name", code, stderr.String())
	}
}
