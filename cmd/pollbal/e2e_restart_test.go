package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/runstate"
	"pollbal/internal/testproc"
)

// restartConfig is a site with two backends: first, in the unassigned pool (checked, never
// scheduled), then web-1, which app www uses. Checks are spread over the interval, so web-1's
// first check comes half an interval after a start: with a 30 s interval, a pollbal that
// knows nothing answers www 503 for 15 s, which is the window a restored state closes.
// stateDir "" turns the state off.
func restartConfig(site, stateDir string, interval time.Duration, first, web1 string) string {
	return fmt.Sprintf(`site: %s
listen: LISTEN
admin: {listen: ADMIN, token_file: TOKEN}
state_dir: %q
poll: {interval: %s, timeout: 400ms, max_backoff: %s}
proxy: {shutdown_timeout: 10s}
services: {web: {}}
apps:
  - {name: www, hosts: ["*"]}
backends:
  - {id: first, address: %s, pool: unassigned}
  - {id: web-1, address: %s}
`, site, stateDir, interval, interval, first, web1)
}

// restartSetup is two example backends and a pollbal on restartConfig.
type restartSetup struct {
	first, web1 *backend
	token       string
	pb          *instance
}

func newRestartSetup(t *testing.T) *restartSetup {
	t.Helper()
	return &restartSetup{
		first: startBackend(t, "first", "127.0.0.1:0", "web serving v1\n"),
		web1:  startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n"),
		token: writeToken(t),
	}
}

// config is restartConfig for this setup, its placeholders filled when a pollbal runs.
func (r *restartSetup) config(site, stateDir string, interval time.Duration) string {
	cfg := strings.ReplaceAll(restartConfig(site, stateDir, interval, r.first.addr, r.web1.addr), "TOKEN", r.token)
	if r.pb != nil {
		cfg = fillAddrs(cfg, r.pb.listen, r.pb.admin)
	}
	return cfg
}

// runFirst starts pollbal with a 500 ms interval and waits until web-1 is ready in its state.
func (r *restartSetup) runFirst(t *testing.T, stateDir string) {
	t.Helper()
	r.pb = startPollbal(t, r.config("e2e", stateDir, 500*time.Millisecond))
	testproc.WaitFor(t, 10*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := r.pb.state(t).backend("web-1")
		return ready
	})
}

// stop sends SIGTERM and checks that pollbal exits 0.
func (r *restartSetup) stop(t *testing.T) {
	t.Helper()
	r.pb.Signal(t, syscall.SIGTERM)
	if code := r.pb.ExitCode(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
}

// restart starts pollbal again on the same addresses with cfg, and returns once it serves
// (/healthz): it may not be ready.
func (r *restartSetup) restart(t *testing.T, cfg string) {
	t.Helper()
	writeInPlace(t, r.pb.cfgPath, cfg)
	next := &instance{cfgPath: r.pb.cfgPath, listen: r.pb.listen, admin: r.pb.admin}
	next.start(t, "pollbal (restarted)", testproc.Options{}, "/healthz", bins.pollbal, "run", "-config", next.cfgPath)
	r.pb = next
}

// firstAnswers sends n requests for app www and returns their status codes and reasons.
func (r *restartSetup) firstAnswers(t *testing.T, n int) []string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	var got []string
	for range n {
		a, err := do(t, c, "http://"+r.pb.listen+"/", "www.test")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSpace(fmt.Sprintf("%d %s", a.code, a.reason)))
	}
	return got
}

func readyzCode(t *testing.T, pb *instance) int {
	t.Helper()
	resp, err := http.Get("http://" + pb.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func restoredOf(t *testing.T, pb *instance, id string) bool {
	t.Helper()
	for _, b := range pb.state(t).Backends {
		if b.ID == id {
			return b.Restored
		}
	}
	t.Fatalf("no backend %s in the state", id)
	return false
}

// TestEndToEndRestartRestoresState: a pollbal restarted with state_dir answers its very first
// requests 200, is ready at once and shows web-1 as restored until its first check; the same
// restart without state_dir answers 503 pool_exhausted until web-1's first check, 15 s later.
func TestEndToEndRestartRestoresState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withState bool
		want      string // each of the first requests
		wantReady int    // /readyz
	}{
		{name: "with state_dir", withState: true, want: "200", wantReady: 200},
		{name: "without state_dir", withState: false, want: "503 pool_exhausted", wantReady: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRestartSetup(t)
			stateDir := ""
			if tc.withState {
				stateDir = filepath.Join(t.TempDir(), "state")
			}
			r.runFirst(t, stateDir)
			r.stop(t)
			if tc.withState {
				f, err := runstate.Read(filepath.Join(stateDir, configs.RuntimeStateName))
				if err != nil || len(f.Backends) != 2 || f.Site != "e2e" {
					t.Fatalf("state written at shutdown: %+v, %v", f, err)
				}
			}

			r.restart(t, r.config("e2e", stateDir, 30*time.Second))
			for i, got := range r.firstAnswers(t, 5) {
				if got != tc.want {
					t.Errorf("request %d after the restart: %s, want %s", i+1, got, tc.want)
				}
			}
			if code := readyzCode(t, r.pb); code != tc.wantReady {
				t.Errorf("/readyz after the restart: %d, want %d", code, tc.wantReady)
			}
			if restored := restoredOf(t, r.pb, "web-1"); restored != tc.withState {
				t.Errorf("web-1 restored: %v, want %v", restored, tc.withState)
			}
			if tc.withState {
				r.pb.WaitOutput(t, 5*time.Second, "the restore logged", `msg="runtime state restored"`)
			}
			r.stop(t)
		})
	}
}

// TestEndToEndRestartIgnoresStaleAndForeignState: a state older than poll.restore_max_age,
// one written by another site, and one that cannot be read are each ignored with a log line
// that says why; pollbal then starts as it would without one.
func TestEndToEndRestartIgnoresStaleAndForeignState(t *testing.T) {
	r := newRestartSetup(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(stateDir, configs.RuntimeStateName)
	r.runFirst(t, stateDir)
	r.stop(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := runstate.Decode(good)
	if err != nil {
		t.Fatal(err)
	}
	stale.Written = time.Now().Add(-time.Hour)
	staleData, err := runstate.Encode(*stale)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, site string
		file       []byte
		why        string
	}{
		{name: "stale", site: "e2e", file: staleData, why: "ago, not less than poll.restore_max_age (30s)"},
		{name: "foreign", site: "e2e-other", file: good, why: `written by site \"e2e\", this is site \"e2e-other\"`},
		{name: "unreadable", site: "e2e", file: good[:len(good)/2], why: "unreadable: decode runtime state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.file, 0o600); err != nil {
				t.Fatal(err)
			}
			r.restart(t, r.config(tc.site, stateDir, 30*time.Second))
			r.pb.WaitOutput(t, 5*time.Second, "the ignored state logged with why", `msg="runtime state ignored: starting from scratch"`)
			if out := r.pb.Output(); !strings.Contains(out, tc.why) {
				t.Errorf("the log does not say %q:\n%s", tc.why, out)
			}
			if got := r.firstAnswers(t, 1); got[0] != "503 pool_exhausted" {
				t.Errorf("first request: %s, want 503 pool_exhausted (nothing restored)", got[0])
			}
			if restoredOf(t, r.pb, "web-1") || readyzCode(t, r.pb) != 503 {
				t.Error("web-1 restored or pollbal ready from an ignored state")
			}
			r.stop(t)
		})
	}
}

// heldSockets are listening sockets that the test holds, as systemd's socket units do, and
// passes to the pollbal it starts.
type heldSockets struct {
	addrs []string
	files []*os.File
}

func holdSockets(t *testing.T, n int) *heldSockets {
	t.Helper()
	h := &heldSockets{}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		ln.Close() // f keeps the socket
		t.Cleanup(func() { f.Close() })
		h.addrs = append(h.addrs, ln.Addr().String())
		h.files = append(h.files, f)
	}
	return h
}

// startActivated starts pollbal on in's config as systemd starts a socket-activated service:
// the held sockets as descriptors 3, 4, ..., LISTEN_FDS, LISTEN_FDNAMES = names, and
// LISTEN_PID set to the process that becomes pollbal (a shell that execs it: its pid is
// pollbal's). It returns once GET /readyz answers 200.
func startActivated(t *testing.T, in *instance, name string, h *heldSockets, names string) {
	t.Helper()
	env := append(os.Environ(), fmt.Sprintf("LISTEN_FDS=%d", len(h.files)), "LISTEN_FDNAMES="+names)
	in.start(t, name, testproc.Options{ExtraFiles: h.files, Env: env}, "/readyz",
		"/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bins.pollbal, "run", "-config", in.cfgPath)
}

// TestEndToEndSocketActivation: started with LISTEN_FDS, pollbal serves on the sockets it was
// given; restarted on the same sockets, it refuses no connection: a request sent while no
// pollbal runs waits in the socket's backlog and is answered by the next one.
func TestEndToEndSocketActivation(t *testing.T) {
	r := newRestartSetup(t)
	h := holdSockets(t, 2)
	stateDir := filepath.Join(t.TempDir(), "state")
	in := &instance{cfgPath: filepath.Join(t.TempDir(), "pollbal.yaml"), listen: h.addrs[0], admin: h.addrs[1]}
	r.pb = in
	if err := os.WriteFile(in.cfgPath, []byte(r.config("e2e", stateDir, 500*time.Millisecond)), 0o644); err != nil {
		t.Fatal(err)
	}
	startActivated(t, in, "pollbal (activated)", h, "proxy:admin")
	for _, l := range []string{"proxy", "admin"} {
		in.WaitOutput(t, 5*time.Second, "the "+l+" socket taken", fmt.Sprintf(`msg="serving on an inherited socket" listener=%s address=%s from=systemd`, l, map[string]string{"proxy": h.addrs[0], "admin": h.addrs[1]}[l]))
	}
	testproc.WaitFor(t, 10*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := in.state(t).backend("web-1")
		return ready
	})
	if got := r.firstAnswers(t, 3); strings.Join(got, ",") != "200,200,200" {
		t.Fatalf("answers on the passed socket: %v", got)
	}

	// The restart: pollbal exits, a client connects and sends its request meanwhile, the next
	// pollbal answers it.
	r.stop(t)
	waiting := dialProxy(t, in, "GET / HTTP/1.1\r\nHost: www.test\r\n\r\n")
	next := &instance{cfgPath: in.cfgPath, listen: in.listen, admin: in.admin}
	startActivated(t, next, "pollbal (activated, restarted)", h, "proxy:admin")
	r.pb = next
	resp, _ := waiting.readAnswer(t)
	if resp.StatusCode != 200 {
		t.Errorf("the request sent while no pollbal ran: %d %s, want 200", resp.StatusCode, resp.Header.Get("X-Pollbal-Reason"))
	}
	r.stop(t)
}

// A listener that the configuration has but no socket was passed for is bound as usual.
func TestEndToEndSocketActivationBindsWhatWasNotPassed(t *testing.T) {
	r := newRestartSetup(t)
	h := holdSockets(t, 1)
	in := &instance{cfgPath: filepath.Join(t.TempDir(), "pollbal.yaml"), listen: h.addrs[0], admin: testproc.FreeAddr(t)}
	r.pb = in
	if err := os.WriteFile(in.cfgPath, []byte(r.config("e2e", "", 500*time.Millisecond)), 0o644); err != nil {
		t.Fatal(err)
	}
	startActivated(t, in, "pollbal (proxy socket only)", h, "proxy")
	in.WaitOutput(t, 5*time.Second, "the proxy socket taken", `msg="serving on an inherited socket" listener=proxy`)
	if strings.Contains(in.Output(), "listener=admin") {
		t.Errorf("an admin socket was taken, none was passed:\n%s", in.Output())
	}
	testproc.WaitFor(t, 10*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := in.state(t).backend("web-1")
		return ready
	})
	if got := r.firstAnswers(t, 1); got[0] != "200" {
		t.Errorf("answer on the passed socket: %v", got)
	}
	r.stop(t)
}
