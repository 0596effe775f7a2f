package handover

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// notifySocket listens where a service manager would and returns its address and a function
// that reads the next message (failing the test after a while without one).
func notifySocket(t *testing.T, addr string) func() string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return func() string {
		t.Helper()
		buf := make([]byte, 4096)
		if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read the notify socket: %v", err)
		}
		return string(buf[:n])
	}
}

func TestNotify(t *testing.T) {
	for _, addr := range []string{
		filepath.Join(t.TempDir(), "notify"),
		fmt.Sprintf("@pollbal-handover-test-%d", os.Getpid()), // abstract, as systemd's own
	} {
		next := notifySocket(t, addr)
		if err := notify(addr, "READY=1"); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if got := next(); got != "READY=1" {
			t.Errorf("%s received %q", addr, got)
		}
	}
	if err := notify("", "READY=1"); err != nil {
		t.Errorf("without a socket: %v, want nothing done", err)
	}
	if err := notify("vsock:2:1234", "READY=1"); err == nil {
		t.Error("a vsock address was accepted")
	}
	if err := notify(filepath.Join(t.TempDir(), "nobody"), "READY=1"); err == nil {
		t.Error("a socket nobody listens on: no error")
	}
}

// TestServiceManagerHearsTheHandOver is the sd_notify conversation of a pollbal under systemd
// that upgrades: READY=1 when it serves, MAINPID=<new pid> from it (the main process) once the
// new one is ready, nothing from the new process, and no STOPPING=1 from the old one on its way
// out after the hand-over. A marker sent last shows that nothing came in between.
func TestServiceManagerHearsTheHandOver(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify")
	next := notifySocket(t, addr)
	t.Setenv(envNotifySocket, addr)
	setHelper(t, "serve", "proxy=127.0.0.1:0")
	p := startParent(t, Options{})
	if got := next(); got != "READY=1" {
		t.Fatalf("first message %q, want READY=1", got)
	}
	pid, err := p.h.Upgrade(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	endChild(t, pid)
	if got, want := next(), "MAINPID="+strconv.Itoa(pid); got != want {
		t.Errorf("after the upgrade %q, want %q", got, want)
	}
	if err := p.h.Stopping(); err != nil {
		t.Error(err)
	}
	if err := notify(addr, "MARKER=1"); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "MARKER=1" {
		t.Errorf("%q came before the marker", got)
	}
}

// TestStoppingWithoutHandOver: a process that did not hand over says STOPPING=1.
func TestStoppingWithoutHandOver(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify")
	next := notifySocket(t, addr)
	t.Setenv(envNotifySocket, addr)
	p := startParent(t, Options{})
	if got := next(); got != "READY=1" {
		t.Fatalf("first message %q, want READY=1", got)
	}
	if err := p.h.Stopping(); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "STOPPING=1" {
		t.Errorf("got %q, want STOPPING=1", got)
	}
}

// TestUpgradeFailsWhenTheServiceManagerCannotBeTold: a new process that is ready but that
// systemd was not told is the main process would be killed with the service when the old one
// exits; so the upgrade fails, the new process is killed and the old one serves on.
func TestUpgradeFailsWhenTheServiceManagerCannotBeTold(t *testing.T) {
	t.Setenv(envNotifySocket, filepath.Join(t.TempDir(), "nobody-listens"))
	setHelper(t, "serve", "proxy=127.0.0.1:0")
	p := buildParent(t, Options{})
	if err := p.h.Ready(); err == nil {
		t.Error("Ready told a socket that nobody listens on and saw no error")
	}
	pid, err := p.h.Upgrade(context.Background())
	if err == nil {
		endChild(t, pid)
		t.Fatal("Upgrade succeeded")
	}
	if !strings.Contains(err.Error(), "the service manager was not told it is the main process now") {
		t.Errorf("error %q does not say that the service manager was not told", err)
	}
	if !gone(pid) {
		t.Errorf("process %d still exists", pid)
	}
	if a, err := ask(newClient(), p.addr); err != nil || a.pid != os.Getpid() {
		t.Errorf("the old process after the failed upgrade: %+v, %v", a, err)
	}
	assertUpgrades(t, p.reg, 0, 1, 0)
}
