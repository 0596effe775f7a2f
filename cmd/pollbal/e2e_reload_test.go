package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// reloadConfig is a configuration for the reload tests: one app on default, the backends given
// as (id, address, capacity), in block style, so that a file cut inside an address can still
// parse (with that address cut to another port), as the measured failure did.
func reloadConfig(tokenFile string, backends [][3]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `site: e2e
listen: LISTEN
admin: {listen: ADMIN, token_file: %s}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends:
`, tokenFile)
	for _, be := range backends {
		fmt.Fprintf(&b, "  - id: %s\n    address: %s\n    capacity: %s\n", be[0], be[1], be[2])
	}
	return b.String()
}

// writeToken writes the admin token file the adminCall helper authenticates with.
func writeToken(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// reloadAnswer is POST /admin/reload's answer.
type reloadAnswer struct {
	code   int
	Status string `json:"status"`
	Forced bool   `json:"forced"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

func postReload(t *testing.T, pb *instance, query string) reloadAnswer {
	t.Helper()
	code, body := adminCall(t, pb, http.MethodPost, "/admin/reload"+query, "")
	a := reloadAnswer{code: code}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("reload answer %q: %v", body, err)
	}
	return a
}

// backendSet is what /api/state says about the configured backends: "id=address/capacity",
// sorted.
func backendSet(t *testing.T, pb *instance) []string {
	t.Helper()
	var s struct {
		Backends []struct {
			ID, Address string
			Capacity    int
		} `json:"backends"`
	}
	getJSON(t, "http://"+pb.admin+"/api/state", &s)
	var out []string
	for _, b := range s.Backends {
		out = append(out, fmt.Sprintf("%s=%s/%d", b.ID, b.Address, b.Capacity))
	}
	slices.Sort(out)
	return out
}

func rejectedCount(t *testing.T, pb *instance, reason string) float64 {
	t.Helper()
	n, _ := metrictest.TextValue(t, pb.metrics(t), `pollbal_config_reloads_rejected_total{reason="`+reason+`"}`)
	return n
}

func reloadGauge(t *testing.T, pb *instance) float64 {
	t.Helper()
	v, ok := metrictest.TextValue(t, pb.metrics(t), "pollbal_config_last_reload_successful")
	if !ok {
		t.Fatal("no pollbal_config_last_reload_successful in /metrics")
	}
	return v
}

// writeInPlace replaces the contents of path the way an editor saving in place does: the same
// file, truncated, then written.
func writeInPlace(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEndToEndReloadSafety runs the real binary with six backends and reloads what an operator
// or an editor can leave behind: a file cut in the middle, a valid file that drops most
// backends (refused, then forced), and a file that is being rewritten.
func TestEndToEndReloadSafety(t *testing.T) {
	token := writeToken(t)
	var all [][3]string
	for i := 1; i <= 6; i++ {
		b := startBackend(t, fmt.Sprintf("web-%d", i), "127.0.0.1:0", "web serving v1\n")
		all = append(all, [3]string{b.id, b.addr, "4"})
	}
	full := reloadConfig(token, all)
	pb := startPollbal(t, full)
	full = fillAddrs(full, pb.listen, pb.admin)
	testproc.WaitFor(t, 10*time.Second, "six backends ready", func() bool {
		s := pb.state(t)
		for _, b := range all {
			if ready, _, _, _ := s.backend(b[0]); !ready {
				return false
			}
		}
		return true
	})
	want := backendSet(t, pb)
	if len(want) != 6 {
		t.Fatalf("started with %v, want six backends", want)
	}
	c := loadClient(2)
	serves := func(t *testing.T) {
		t.Helper()
		for i := 0; i < 6; i++ {
			if a, err := do(t, c, "http://"+pb.listen+"/", "www.test"); err != nil || a.code != 200 {
				t.Fatalf("request %d: %+v %v, want 200", i, a, err)
			}
		}
	}
	unchanged := func(t *testing.T, what string) {
		t.Helper()
		if got := backendSet(t, pb); !slices.Equal(got, want) {
			t.Fatalf("after %s the backends are %v, want the running %v", what, got, want)
		}
		if g := reloadGauge(t, pb); g != 0 {
			t.Fatalf("after %s pollbal_config_last_reload_successful is %v, want 0", what, g)
		}
		serves(t)
	}
	restore := func(t *testing.T) {
		t.Helper()
		writeInPlace(t, pb.cfgPath, full)
		if a := postReload(t, pb, ""); a.code != 200 {
			t.Fatalf("reload of the full config: %+v", a)
		}
		if g := reloadGauge(t, pb); g != 1 {
			t.Fatalf("gauge %v after a good reload, want 1", g)
		}
	}

	t.Run("a config cut in the middle is rejected and nothing changes", func(t *testing.T) {
		second := strings.Index(full, all[1][1])
		cuts := []struct {
			name string
			at   int
		}{
			{name: "half the file", at: len(full) / 2},
			// The measured failure: the second backend's address lost its last digit and the
			// backends after it vanished.
			{name: "inside the second backend's address", at: second + len(all[1][1]) - 1},
			{name: "right after backends:", at: strings.Index(full, "backends:\n") + len("backends:\n")},
			{name: "inside the apps line", at: strings.Index(full, "apps:") + 10},
		}
		for _, cut := range cuts {
			writeInPlace(t, pb.cfgPath, full[:cut.at])
			before := rejectedCount(t, pb, "reload_guard") + rejectedCount(t, pb, "config_invalid")
			a := postReload(t, pb, "")
			if a.code == 200 || (a.Reason != "reload_guard" && a.Reason != "config_invalid") {
				t.Fatalf("%s (%d of %d bytes): answer %+v, want a config_invalid or reload_guard rejection", cut.name, cut.at, len(full), a)
			}
			if after := rejectedCount(t, pb, "reload_guard") + rejectedCount(t, pb, "config_invalid"); after != before+1 {
				t.Fatalf("%s: rejections counted %v → %v, want one more", cut.name, before, after)
			}
			unchanged(t, cut.name)
			t.Logf("%s (%d of %d bytes): %d %s: %s", cut.name, cut.at, len(full), a.code, a.Reason, a.Error)
		}
		// SIGHUP reads the same cut file the same way.
		writeInPlace(t, pb.cfgPath, full[:second+len(all[1][1])-1])
		before := rejectedCount(t, pb, "reload_guard")
		pb.Signal(t, syscall.SIGHUP)
		testproc.WaitFor(t, 5*time.Second, "the SIGHUP reload rejected as reload_guard", func() bool {
			return rejectedCount(t, pb, "reload_guard") == before+1
		})
		unchanged(t, "SIGHUP with a cut file")
		restore(t)
	})

	t.Run("a config that drops most backends needs force", func(t *testing.T) {
		two := reloadConfig(token, all[:2])
		writeInPlace(t, pb.cfgPath, fillAddrs(two, pb.listen, pb.admin))
		a := postReload(t, pb, "")
		if a.code != 409 || a.Reason != "reload_guard" || !strings.Contains(a.Error, "keeps 2 of the 6 running backends") {
			t.Fatalf("reload dropping 4 of 6: %+v, want 409 reload_guard", a)
		}
		unchanged(t, "the guarded reload")
		before := rejectedCount(t, pb, "reload_guard")
		pb.Signal(t, syscall.SIGHUP) // never forces
		testproc.WaitFor(t, 5*time.Second, "SIGHUP rejected as reload_guard", func() bool {
			return rejectedCount(t, pb, "reload_guard") == before+1
		})
		unchanged(t, "SIGHUP")
		if a := postReload(t, pb, "?force=yes"); a.code != 400 {
			t.Fatalf("force=yes: %+v, want 400", a)
		}
		unchanged(t, "force=yes")
		a = postReload(t, pb, "?force=true")
		if a.code != 200 || !a.Forced {
			t.Fatalf("forced reload: %+v, want 200 forced", a)
		}
		if got := backendSet(t, pb); len(got) != 2 {
			t.Fatalf("after the forced reload: %v, want two backends", got)
		}
		if g := reloadGauge(t, pb); g != 1 {
			t.Fatalf("gauge %v after the forced reload, want 1", g)
		}
		pb.WaitOutput(t, 5*time.Second, "the forced reload logged as such", "forced reload")
		// Adding the four back is no guard matter (every running backend is kept).
		restore(t)
		testproc.WaitFor(t, 10*time.Second, "six backends ready again", func() bool {
			s := pb.state(t)
			for _, b := range all {
				if ready, _, _, _ := s.backend(b[0]); !ready {
					return false
				}
			}
			return true
		})
	})

	t.Run("a config rewritten over and over is rejected as config_changing", func(t *testing.T) {
		f, err := os.OpenFile(pb.cfgPath, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var writes atomic.Int64
		wg.Add(1)
		go func() { // rewrites the file in place every 10 ms, each time with other contents
			defer wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				if _, err := f.WriteAt(fmt.Appendf(nil, "%s# rewrite %08d\n", full, i), 0); err != nil {
					t.Error(err)
					return
				}
				writes.Add(1)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		start := time.Now()
		a := postReload(t, pb, "")
		took := time.Since(start)
		close(stop)
		wg.Wait()
		switch {
		case a.code == 409 && a.Reason == "config_changing":
			if took < 2*time.Second {
				t.Fatalf("gave up after %s, want about 2 s of trying", took)
			}
			unchanged(t, "the reload of a changing file")
			t.Logf("rejected as config_changing after %s, %d rewrites", took, writes.Load())
		case a.code == 200:
			// Only when the writer stalled for a whole gap on a loaded machine: then two reads
			// were identical, and what was applied is a whole file (the same backends).
			if got := backendSet(t, pb); !slices.Equal(got, want) {
				t.Fatalf("applied while rewritten, and the backends changed to %v", got)
			}
			t.Logf("the writer stalled past the gap: applied once settled after %s, %d rewrites", took, writes.Load())
		default:
			t.Fatalf("reload while the file is rewritten: %+v, want 409 config_changing (or applied once settled)", a)
		}
		if a := postReload(t, pb, ""); a.code != 200 {
			t.Fatalf("the same file once it holds still: %+v, want applied", a)
		}
	})

	t.Run("a config written slowly in place is applied whole or not at all", func(t *testing.T) {
		// The new config renames web-6 and raises its capacity; an editor writes it in pieces.
		next := all[:5:5]
		next = append(next, [3]string{"web-6b", all[5][1], "9"})
		content := fillAddrs(reloadConfig(token, next), pb.listen, pb.admin)
		f, err := os.OpenFile(pb.cfgPath, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		written := make(chan struct{})
		go func() { // eight pieces, 25 ms apart
			defer close(written)
			tick := time.NewTicker(25 * time.Millisecond)
			defer tick.Stop()
			step := len(content)/8 + 1
			for off := 0; off < len(content); off += step {
				if _, err := f.Write([]byte(content[off:min(off+step, len(content))])); err != nil {
					t.Error(err)
					return
				}
				<-tick.C
			}
		}()
		a := postReload(t, pb, "")
		<-written
		got := backendSet(t, pb)
		switch {
		case a.code == 200:
			if !slices.Contains(got, fmt.Sprintf("web-6b=%s/9", all[5][1])) || len(got) != 6 {
				t.Fatalf("applied, but the backends are %v, not the whole new file", got)
			}
		default:
			// A writer stalled past the settle gap on a loaded machine: then the part read must
			// have been rejected, never applied.
			if !slices.Equal(got, want) {
				t.Fatalf("rejected (%+v), but the backends changed to %v", a, got)
			}
		}
		t.Logf("reload during a slow write: %d %s", a.code, a.Reason)
	})
}

// TestEndToEndReaddedBackendKeepsItsSlot: a backend of capacity 1 holds one request; a reload
// removes it and the next adds it back (or renames it): it never gets a second request while
// the first holds its slot, as its own peak concurrency shows.
func TestEndToEndReaddedBackendKeepsItsSlot(t *testing.T) {
	token := writeToken(t)
	web := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	other := startBackend(t, "other", "127.0.0.1:0", "web serving v1\n")
	cfgWith := func(id string) string {
		var b strings.Builder
		fmt.Fprintf(&b, `site: e2e
listen: LISTEN
admin: {listen: ADMIN, token_file: %s}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends:
  - {id: other, address: %s, pool: elsewhere}
`, token, other.addr)
		if id != "" {
			fmt.Fprintf(&b, "  - {id: %s, address: %s, capacity: 1}\n", id, web.addr)
		}
		return b.String()
	}
	pb := startPollbal(t, cfgWith("web-1"))
	reloadTo := func(t *testing.T, id string) {
		t.Helper()
		writeInPlace(t, pb.cfgPath, fillAddrs(cfgWith(id), pb.listen, pb.admin))
		if a := postReload(t, pb, ""); a.code != 200 {
			t.Fatalf("reload to %q: %+v", id, a)
		}
		if id == "" {
			return
		}
		testproc.WaitFor(t, 10*time.Second, id+" ready", func() bool {
			ready, _, _, _ := pb.state(t).backend(id)
			return ready
		})
	}
	testproc.WaitFor(t, 10*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := pb.state(t).backend("web-1")
		return ready
	})
	url := "http://" + pb.listen
	for _, tc := range []struct {
		name  string
		steps []string // ids web's address has in successive reloads ("" = removed)
	}{
		{name: "removed, then added back", steps: []string{"", "web-1"}},
		{name: "renamed", steps: []string{"web-1-renamed"}},
		{name: "removed, then added back under another id", steps: []string{"", "web-1-again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := make(chan answer, 1)
			go func() {
				a, err := do(t, loadClient(1), url+"/hold", "www.test")
				if err != nil {
					t.Error(err)
				}
				held <- a
			}()
			testproc.WaitFor(t, 5*time.Second, "the held request at the backend", func() bool { return web.stats(t).InFlight == 1 })
			for _, id := range tc.steps {
				reloadTo(t, id)
			}
			// While the first request holds the only slot, every other one is refused at once.
			var wg sync.WaitGroup
			var refused atomic.Int64
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, err := do(t, loadClient(1), url+"/hold", "www.test")
					if err != nil {
						t.Error(err)
						return
					}
					if a.code == 503 && a.reason == "pool_exhausted" {
						refused.Add(1)
					} else {
						t.Errorf("a request while the slot is held: %d %s from %s, want 503 pool_exhausted", a.code, a.reason, a.backend)
					}
				}()
			}
			wg.Wait()
			if st := web.stats(t); st.PeakInFlight != 1 || st.InFlight != 1 {
				t.Fatalf("backend in flight %d, peak %d; want 1 and 1", st.InFlight, st.PeakInFlight)
			}
			if got, _ := http.Post("http://"+web.addr+"/_backend/release", "", nil); got != nil {
				got.Body.Close()
			}
			if a := <-held; a.code != 200 {
				t.Fatalf("the held request: %+v, want 200", a)
			}
			last := tc.steps[len(tc.steps)-1]
			testproc.WaitFor(t, 5*time.Second, "the slot free again", func() bool {
				a, err := do(t, loadClient(1), url+"/", "www.test")
				return err == nil && a.code == 200 && a.backend == last
			})
			if st := web.stats(t); st.PeakInFlight != 1 {
				t.Fatalf("backend peak concurrency %d, want 1", st.PeakInFlight)
			}
			t.Logf("%d requests refused while the slot was held; backend peak 1", refused.Load())
			if last != "web-1" {
				reloadTo(t, "web-1")
			}
		})
	}
}

// Regression: kill -9 during admin moves, 60 times, left 18 temporary files beside the state
// file forever. pollbal is killed during a burst of moves ten times; after every restart no
// temporary file is left and the state file loads.
func TestEndToEndKillDuringMovesLeavesNoTempFiles(t *testing.T) {
	token := writeToken(t)
	stateDir := t.TempDir()
	state := filepath.Join(stateDir, "state.json")
	web := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	pb := startPollbal(t, fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN, token_file: %s, state_file: %s}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends: [{id: web-1, address: %s}]
`, token, state, web.addr))
	temps := func() []string {
		entries, err := os.ReadDir(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".state.json.tmp-") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	left := 0
	for round := 0; round < 10; round++ {
		var moves atomic.Int64
		clients := [3]*http.Client{} // one a worker
		for w := range clients {
			clients[w] = &http.Client{Timeout: 2 * time.Second}
		}
		stop := testproc.Workers(len(clients), func(w, i int) bool {
			req, _ := http.NewRequest(http.MethodPut, "http://"+pb.admin+"/admin/backends/web-1/pool",
				strings.NewReader(fmt.Sprintf(`{"pool":"p-%d-%d"}`, w, i%5)))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := clients[w].Do(req)
			if err != nil {
				return false // killed
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				moves.Add(1)
			}
			return true
		})
		target := int64(20 + 7*round) // kill at a different point of the burst each round
		testproc.WaitFor(t, 10*time.Second, "a burst of moves", func() bool { return moves.Load() >= target })
		pb.Kill()
		stop()
		found := temps()
		left += len(found)
		if round == 0 {
			// Make sure the start-up cleanup has something to do at least once: a temporary file
			// as an interrupted write leaves it.
			if err := os.WriteFile(filepath.Join(stateDir, ".state.json.tmp-123456"), []byte(`{"version":1,"over`), 0o600); err != nil {
				t.Fatal(err)
			}
			left++
		}
		pb = startPollbalAt(t, pb)
		if got := temps(); len(got) != 0 {
			t.Fatalf("round %d: temporary files after the restart: %v", round, got)
		}
		if round == 0 {
			pb.WaitOutput(t, 5*time.Second, "the start-up cleanup logged", "removed temporary files")
		}
		code, body := adminCall(t, pb, http.MethodGet, "/admin/pools", "")
		if code != 200 {
			t.Fatalf("round %d: GET /admin/pools after the restart: %d %s", round, code, body)
		}
		if pool, source := poolOf(t, pb, "web-1"); source != "admin" || !strings.HasPrefix(pool, "p-") {
			t.Fatalf("round %d: web-1 in %s (%s) after the restart, want one of the moved-to pools (admin)", round, pool, source)
		}
	}
	t.Logf("10 kills during moves: %d temporary files were left (one planted), none after any restart", left)
}
