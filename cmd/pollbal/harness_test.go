package main

// End-to-end harness: builds the real pollbal binary and the example backend once, and starts
// them as processes on 127.0.0.1 with short intervals.
//
// The tests' configurations poll every 500 ms with a 450 ms timeout (fall 1): a check between two
// -race processes on a loaded 2-core machine reached the 150 ms timeout they used to have, and
// with fall 1 one timed-out check takes a backend out for an interval, which changes where
// requests go, the readiness and the metrics these tests assert.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pollbal/internal/testbackend/api"
	"pollbal/internal/testproc"
)

// bins holds the binaries built by TestMain.
var bins struct {
	dir, pollbal, backend string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pollbal-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.dir = dir
	bins.pollbal = filepath.Join(dir, "pollbal")
	bins.backend = filepath.Join(dir, "backend")
	for _, b := range []struct{ out, pkg string }{{bins.pollbal, "."}, {bins.backend, "../../internal/testbackend"}} {
		if err := testproc.GoBuild(b.out, b.pkg, testproc.Race); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// backend is a running example backend.
type backend struct {
	*testproc.Proc
	id, addr, poolFile, lockFile string
}

// startBackend starts the example backend on listen ("127.0.0.1:0" for a free port) serving
// poolBody from its pool file.
func startBackend(t testing.TB, id, listen, poolBody string, extra ...string) *backend {
	t.Helper()
	dir := t.TempDir()
	b := &backend{id: id, poolFile: filepath.Join(dir, "pool"), lockFile: filepath.Join(dir, "lock")}
	if err := os.WriteFile(b.poolFile, []byte(poolBody), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start(t, listen, extra...)
	return b
}

func (b *backend) start(t testing.TB, listen string, extra ...string) {
	t.Helper()
	args := append([]string{"-listen", listen, "-id", b.id, "-pool-file", b.poolFile, "-lock-file", b.lockFile}, extra...)
	b.Proc, b.addr = testproc.StartServer(t, "backend "+b.id, testproc.Options{}, bins.backend, args...)
}

func (b *backend) setPool(t testing.TB, body string) {
	t.Helper()
	tmp := b.poolFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, b.poolFile); err != nil {
		t.Fatal(err)
	}
}

// stats reads the example backend's counters.
func (b *backend) stats(t testing.TB) api.Stats {
	t.Helper()
	var s api.Stats
	getJSON(t, "http://"+b.addr+"/_backend/stats", &s)
	return s
}

// startSingle starts one example backend, web-1, and pollbal in front of it with startOver;
// backendKeys are more keys for web-1's entry (", capacity: 100"; "" for none).
func startSingle(t *testing.T, proxyKeys, backendKeys string) (*instance, *backend) {
	t.Helper()
	be := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	return startOver(t, proxyKeys, be.addr+backendKeys), be
}

// startOver starts pollbal with the given proxy: flow mapping ("{}" for the defaults) in front
// of backends web-1, web-2, … at addrs (an address may be followed by more keys of its entry),
// one app for every host, and waits until every backend is ready.
//
// Its tests are about the data plane, not health, and some saturate a 2-core machine (40
// race-built 60 MiB streams at once): there a check answered in time can still be read late,
// and one failed check would make a backend not ready and fail the test's requests with 503
// pool_exhausted. So the checks get a long timeout and several tries before a backend falls.
func startOver(t *testing.T, proxyKeys string, addrs ...string) *instance {
	t.Helper()
	var backends strings.Builder
	for i, a := range addrs {
		fmt.Fprintf(&backends, "  - {id: web-%d, address: %s}\n", i+1, a)
	}
	pb := startPollbal(t, fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 1s, timeout: 900ms, fall: 5}
services: {web: {}}
apps:
  - {name: www, hosts: ["*"]}
backends:
%sproxy: %s
`, backends.String(), proxyKeys))
	testproc.WaitFor(t, 10*time.Second, "every backend ready", func() bool {
		for _, b := range pb.state(t).Backends {
			if !b.Ready {
				return false
			}
		}
		return true
	})
	return pb
}

// instance is a running pollbal.
type instance struct {
	*testproc.Proc
	cfgPath, listen, admin string
}

// startPollbal writes cfg (with LISTEN and ADMIN placeholders filled) and runs pollbal on it,
// returning once /readyz answers 200.
func startPollbal(t testing.TB, cfg string) *instance {
	t.Helper()
	in := &instance{cfgPath: filepath.Join(t.TempDir(), "pollbal.yaml"), listen: testproc.FreeAddr(t), admin: testproc.FreeAddr(t)}
	cfg = fillAddrs(cfg, in.listen, in.admin)
	if err := os.WriteFile(in.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in.run(t, "pollbal")
	return in
}

// run starts pollbal, named name in failure messages, on in's config file and returns once
// /readyz answers 200.
func (in *instance) run(t testing.TB, name string) {
	t.Helper()
	in.start(t, name, testproc.Options{}, "/readyz", bins.pollbal, "run", "-config", in.cfgPath)
}

// start runs bin with args (pollbal on in's config file, or a launcher that runs it) with
// opts, and returns once GET path on the admin listener answers 200: "/readyz" for a pollbal
// that is ready, "/healthz" for one that serves but may still be waiting for its first check
// round.
func (in *instance) start(t testing.TB, name string, opts testproc.Options, path, bin string, args ...string) {
	t.Helper()
	in.Proc = testproc.Start(t, name, opts, bin, args...)
	// A timeout: on a socket someone else holds (socket activation) a GET waits in the backlog
	// for as long as pollbal is not serving.
	c := &http.Client{Timeout: 5 * time.Second}
	in.WaitFor(t, 15*time.Second, name+" "+path, func() bool {
		resp, err := c.Get("http://" + in.admin + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (in *instance) state(t testing.TB) apiState {
	t.Helper()
	var s apiState
	getJSON(t, "http://"+in.admin+"/api/state", &s)
	return s
}

func (in *instance) metrics(t testing.TB) string {
	t.Helper()
	resp, err := http.Get("http://" + in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// apiState is the part of /api/state the end-to-end tests read.
type apiState struct {
	Site     string `json:"site"`
	Ready    bool   `json:"ready"`
	PID      int    `json:"pid"`
	Started  string `json:"started"`
	Backends []struct {
		ID       string `json:"id"`
		Pool     string `json:"pool"`
		Ready    bool   `json:"ready"`
		Restored bool   `json:"restored"`
		Reason   string `json:"reason"`
		Warned   bool   `json:"warned"`
		Ejected  bool   `json:"ejected"`
		InFlight int    `json:"in_flight"`
		Reports  []struct {
			Service, Status, Version string
		} `json:"reports"`
	} `json:"backends"`
	Groups []struct {
		Pool, Service, Version string
		Serving, Leaving       int
		Threshold              int
		Warned                 []string
	} `json:"groups"`
	Apps []struct {
		Name       string `json:"name"`
		Pool       string `json:"pool"`
		Candidates int    `json:"candidates"`
	} `json:"apps"`
}

func (s apiState) backend(id string) (ready bool, reason string, reports string, ok bool) {
	for _, b := range s.Backends {
		if b.ID == id {
			var parts []string
			for _, r := range b.Reports {
				parts = append(parts, strings.TrimSpace(r.Service+" "+r.Status+" "+r.Version))
			}
			return b.Ready, b.Reason, strings.Join(parts, ";"), true
		}
	}
	return false, "", "", false
}

// inFlight is backend id's in_flight (leases held) in /api/state.
func (in *instance) inFlight(t *testing.T, id string) int {
	t.Helper()
	for _, b := range in.state(t).Backends {
		if b.ID == id {
			return b.InFlight
		}
	}
	t.Fatalf("%s missing from /api/state", id)
	return 0
}

func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
