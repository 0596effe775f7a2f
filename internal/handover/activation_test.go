package handover

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// socketActivate runs the helper under systemd-socket-activate, the launcher that does what a
// socket unit does (LISTEN_PID set between fork and exec): it listens on n fresh 127.0.0.1
// addresses, passes them named fdnames (none when ""), and execs the helper, configured by
// listen(addresses), on the first connection. It tries other ports when one was taken.
func socketActivate(t *testing.T, bin string, n int, fdnames string, listen func(addrs []string) string) (*testproc.Proc, []string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		var addrs []string
		var args []string
		for range n {
			a := testproc.FreeAddr(t)
			addrs = append(addrs, a)
			args = append(args, "-l", a)
		}
		if fdnames != "" {
			args = append(args, "--fdname="+fdnames)
		}
		args = append(args, "-E", helperEnv+"=serve", "-E", listenEnv+"="+listen(addrs), os.Args[0], "-test.run=^$")
		p := testproc.Start(t, "systemd-socket-activate", testproc.Options{}, bin, args...)
		testproc.WaitFor(t, 30*time.Second, "systemd-socket-activate to listen", func() bool {
			return strings.Count(p.Output(), "Listening on ") == n || p.Exited()
		})
		if !p.Exited() {
			return p, addrs
		}
		if !strings.Contains(p.Output(), "Address already in use") || attempt == 3 {
			t.Fatalf("systemd-socket-activate exited: %s", p.Output())
		}
	}
}

// TestSocketActivation: sockets that systemd passes, named or in the configured order, are the
// ones pollbal serves on, including the first connection that started it (it waited in the
// backlog); a listener systemd did not pass is bound; a socket whose name or address disagrees
// with the configuration stops the start with an error that says so.
func TestSocketActivation(t *testing.T) {
	bin, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate not installed (Debian: systemd)")
	}
	for _, tc := range []struct {
		name    string
		sockets int
		fdnames string
		listen  func(a []string) string
		serves  []int  // the indexes of the passed sockets that must answer, in listen's order
		binds   string // a listener the helper must bind itself
		err     string // in the output of a start that fails (exit status 1)
	}{
		{name: "named", sockets: 2, fdnames: "proxy:admin",
			listen: func(a []string) string { return "proxy=" + a[0] + " admin=" + a[1] }, serves: []int{0, 1}},
		{name: "named, in another order", sockets: 2, fdnames: "admin:proxy",
			listen: func(a []string) string { return "proxy=" + a[1] + " admin=" + a[0] }, serves: []int{1, 0}},
		{name: "unnamed: in the configured order", sockets: 2,
			listen: func(a []string) string { return "proxy=" + a[0] + " admin=" + a[1] }, serves: []int{0, 1}},
		{name: "a listener not passed is bound", sockets: 1, fdnames: "proxy",
			listen: func(a []string) string { return "proxy=" + a[0] + " admin=127.0.0.1:0" }, serves: []int{0}, binds: "admin"},
		{name: "a name pollbal does not know", sockets: 1, fdnames: "pollbal.socket",
			listen: func(a []string) string { return "proxy=" + a[0] },
			err:    `descriptor 3 is named "pollbal.socket"; pollbal's listeners are named proxy, tls, admin (FileDescriptorName= in the socket unit)`},
		{name: "another address than configured", sockets: 1, fdnames: "proxy",
			listen: func(a []string) string { return "proxy=127.0.0.1:1" },
			err:    "but the configuration says 127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, addrs := socketActivate(t, bin, tc.sockets, tc.fdnames, tc.listen)
			// The first connection starts pollbal; it waits in the backlog meanwhile.
			client := newClient()
			if tc.err != "" {
				c, err := net.Dial("tcp", addrs[0])
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if code := p.ExitCode(t, 60*time.Second); code != 1 {
					t.Errorf("exit status %d, want 1", code)
				}
				if !strings.Contains(p.Output(), tc.err) {
					t.Errorf("output does not say %q:\n%s", tc.err, p.Output())
				}
				return
			}
			first, err := ask(client, addrs[0])
			if err != nil {
				t.Fatal(err)
			}
			// systemd-socket-activate execs pollbal: the same process.
			if first.pid != p.Pid() {
				t.Errorf("answered by pid %d, want %d", first.pid, p.Pid())
			}
			if got := p.WaitLine(t, 30*time.Second, "ready pid="); !strings.HasSuffix(got, "from=systemd") {
				t.Errorf("ready line %q, want the sockets from systemd", got)
			}
			for i, name := range []string{Proxy, Admin}[:len(tc.serves)] {
				want := addrs[tc.serves[i]]
				if got := p.WaitLine(t, 30*time.Second, "listening "+name+" "); got != want {
					t.Errorf("%s listens on %s, want the passed socket %s", name, got, want)
				}
				if a, err := ask(client, want); err != nil || a.pid != p.Pid() {
					t.Errorf("%s at %s: %+v, %v", name, want, a, err)
				}
			}
			if tc.binds != "" {
				addr := p.WaitLine(t, 30*time.Second, "listening "+tc.binds+" ")
				if a, err := ask(client, addr); err != nil || a.pid != p.Pid() {
					t.Errorf("bound %s listener at %s: %+v, %v", tc.binds, addr, a, err)
				}
			}
		})
	}
}

// TestEnvironmentIsCleared: New removes the hand-over variables, so that no child reads them;
// NOTIFY_SOCKET stays for the process an upgrade starts.
func TestEnvironmentIsCleared(t *testing.T) {
	for _, v := range handoverVars() {
		t.Setenv(v, "")
	}
	t.Setenv(envListenPID, fmt.Sprint(os.Getpid()+1)) // another process's: ignored
	t.Setenv(envListenFDs, "1")
	t.Setenv(envNotifySocket, "/run/systemd/notify")
	for _, v := range []string{envUpgradeFDs, envUpgradeFDNames, envReadyFD, envListenFDNames} {
		_ = os.Unsetenv(v)
	}
	h, err := New(Options{Names: []string{Proxy}})
	if err != nil {
		t.Fatal(err)
	}
	if h.Inherited() != "" {
		t.Errorf("inherited from %q, want nothing", h.Inherited())
	}
	for _, v := range handoverVars() {
		if val, ok := os.LookupEnv(v); ok {
			t.Errorf("%s=%q is still in the environment", v, val)
		}
	}
	if os.Getenv(envNotifySocket) != "/run/systemd/notify" {
		t.Error("NOTIFY_SOCKET was removed")
	}
}
