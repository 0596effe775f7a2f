package main

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

	"pollbal/internal/store"
	"pollbal/internal/testproc"
)

const adminToken = "e2e-admin-token"

// adminCall sends an authenticated admin request and returns the status and body.
func adminCall(t *testing.T, in *instance, method, path, body string) (int, string) {
	t.Helper()
	code, answer, _ := adminCallReason(t, in, method, path, body)
	return code, answer
}

// adminCallReason is adminCall that also returns X-Pollbal-Reason.
func adminCallReason(t *testing.T, in *instance, method, path, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+in.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("X-Pollbal-Reason")
}

// poolOf returns a backend's pool and pool source from /api/state.
func poolOf(t *testing.T, in *instance, id string) (string, string) {
	t.Helper()
	pool, source, ok := lookupPool(t, in, id)
	if !ok {
		t.Fatalf("backend %s not in state", id)
	}
	return pool, source
}

// lookupPool returns a backend's pool and pool source from /api/state, and whether the
// backend is there.
func lookupPool(t *testing.T, in *instance, id string) (pool, source string, ok bool) {
	t.Helper()
	var s struct {
		Backends []struct {
			ID, Pool   string
			PoolSource string `json:"pool_source"`
		} `json:"backends"`
	}
	getJSON(t, "http://"+in.admin+"/api/state", &s)
	for _, b := range s.Backends {
		if b.ID == id {
			return b.Pool, b.PoolSource, true
		}
	}
	return "", "", false
}

// movesConfig is a config with the admin API on (its token in tokenFile) and admin moves kept
// in stateFile and, when store is not empty, in the store it names (lines under admin:), for
// two backends web-1 and web-2 behind app www, tried in that order.
func movesConfig(tokenFile, stateFile, store, web1, web2 string) string {
	return fmt.Sprintf(`site: e2e
listen: LISTEN
admin:
  listen: ADMIN
  token_file: %s
  state_file: %s
%spoll: {interval: 500ms, timeout: 450ms}
proxy: {tie_break: id}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends:
  - {id: web-1, address: %s}
  - {id: web-2, address: %s}
`, tokenFile, stateFile, store, web1, web2)
}

// TestEndToEndAdminMovePersists moves a backend through the admin API of the real binary: the
// very next request already avoids it, the move survives kill -9 and a restart on the same
// state file, and a state file that cannot be written makes the next move fail with 500 and
// leaves scheduling as it was.
func TestEndToEndAdminMovePersists(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	web1 := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	web2 := startBackend(t, "web-2", "127.0.0.1:0", "web serving v1\n")
	cfg := movesConfig(writeToken(t), filepath.Join(stateDir, "overrides.json"), "", web1.addr, web2.addr)
	pb := startPollbal(t, cfg)
	testproc.WaitFor(t, 5*time.Second, "both ready", func() bool {
		s := pb.state(t)
		r1, _, _, _ := s.backend("web-1")
		r2, _, _, _ := s.backend("web-2")
		return r1 && r2
	})
	c := loadClient(1)
	url := "http://" + pb.listen + "/"
	if a, err := do(t, c, url, "www.test"); err != nil || a.backend != "web-1" {
		t.Fatalf("before the move, tie_break id serves web-1; got %+v %v", a, err)
	}

	code, body := adminCall(t, pb, http.MethodPut, "/admin/backends/web-1/pool", `{"pool":"unassigned"}`)
	if code != 200 {
		t.Fatalf("move: %d %s", code, body)
	}
	// The very next request already uses the new pool.
	for i := 0; i < 20; i++ {
		a, err := do(t, c, url, "www.test")
		if err != nil || a.code != 200 || a.backend != "web-2" {
			t.Fatalf("request %d after the move: %+v %v, want web-2", i, a, err)
		}
	}

	// kill -9 right after the move, restart on the same config and state file.
	pb.Kill()
	pb2 := startPollbalAt(t, pb)
	if pool, source := poolOf(t, pb2, "web-1"); pool != "unassigned" || source != "admin" {
		t.Fatalf("after kill -9 and restart: web-1 in %s (%s), want unassigned (admin)", pool, source)
	}
	var pools struct {
		Pools []struct {
			Name     string   `json:"name"`
			Backends []string `json:"backends"`
		} `json:"pools"`
	}
	code, body = adminCall(t, pb2, http.MethodGet, "/admin/pools", "")
	if code != 200 || json.Unmarshal([]byte(body), &pools) != nil || pools.Pools[len(pools.Pools)-1].Name != "unassigned" {
		t.Fatalf("GET /admin/pools: %d %s", code, body)
	}

	// Make the state file unwritable (root ignores permissions, so replace its directory with a
	// plain file): the next move fails with 500 and nothing changes.
	if err := os.RemoveAll(stateDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateDir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, body = adminCall(t, pb2, http.MethodDelete, "/admin/backends/web-1/pool", "")
	if code != 500 {
		t.Fatalf("DELETE with an unwritable state file: %d %s, want 500", code, body)
	}
	if pool, source := poolOf(t, pb2, "web-1"); pool != "unassigned" || source != "admin" {
		t.Fatalf("after a failed write web-1 is in %s (%s), want it unchanged in unassigned", pool, source)
	}
	testproc.WaitFor(t, 5*time.Second, "pollbal ready after restart", func() bool {
		r, _, _, _ := pb2.state(t).backend("web-2")
		return r
	})
	for i := 0; i < 10; i++ {
		a, err := do(t, c, "http://"+pb2.listen+"/", "www.test")
		if err != nil || a.backend != "web-2" {
			t.Fatalf("scheduling changed after a failed move: %+v %v", a, err)
		}
	}
	pb2.WaitOutput(t, 5*time.Second, "an audit line for the admin calls", "admin call")
}

// startPollbalAt restarts pollbal on a previous instance's config file and addresses.
func startPollbalAt(t *testing.T, prev *instance) *instance {
	t.Helper()
	in := &instance{cfgPath: prev.cfgPath, listen: prev.listen, admin: prev.admin}
	in.run(t, "pollbal (restarted)")
	return in
}

// TestEndToEndAdminStateFileReload: a reload that names another admin.state_file writes the
// running moves to it before using it; when it cannot, the reload is rejected whole (the token
// it also changes is not applied) and the moves keep going to the old file.
func TestEndToEndAdminStateFileReload(t *testing.T) {
	dir := t.TempDir()
	oldState, newState := filepath.Join(dir, "old.json"), filepath.Join(dir, "new.json")
	token := writeToken(t)
	rotated := filepath.Join(dir, "rotated-token")
	if err := os.WriteFile(rotated, []byte("rotated-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	web1 := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	web2 := startBackend(t, "web-2", "127.0.0.1:0", "web serving v1\n")
	pb := startPollbal(t, movesConfig(token, oldState, "", web1.addr, web2.addr))
	if code, body := adminCall(t, pb, http.MethodPut, "/admin/backends/web-1/pool", `{"pool":"unassigned"}`); code != 200 {
		t.Fatalf("move: %d %s", code, body)
	}
	reloadWith := func(tokenFile, stateFile string) reloadAnswer {
		t.Helper()
		writeInPlace(t, pb.cfgPath, fillAddrs(movesConfig(tokenFile, stateFile, "", web1.addr, web2.addr), pb.listen, pb.admin))
		return postReload(t, pb, "")
	}
	moves := func(path string) store.Moves {
		t.Helper()
		m, err := store.ReadState(path)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	if a := reloadWith(rotated, filepath.Join(dir, "missing", "state.json")); a.code != http.StatusInternalServerError || !strings.Contains(a.Error, "admin.state_file") {
		t.Fatalf("reload to an unwritable state file: %+v, want 500 naming admin.state_file", a)
	}
	// The old token still works (adminCall sends it), so the token change was not applied.
	if code, body := adminCall(t, pb, http.MethodPut, "/admin/backends/web-2/pool", `{"pool":"canary"}`); code != 200 {
		t.Fatalf("move after the rejected reload: %d %s", code, body)
	}
	if got := moves(oldState); got["web-1"] != "unassigned" || got["web-2"] != "canary" {
		t.Fatalf("the old state file holds %v, want both moves", got)
	}

	if a := reloadWith(token, newState); a.code != http.StatusOK {
		t.Fatalf("reload to a new state file: %+v", a)
	}
	if got := moves(newState); got["web-1"] != "unassigned" || got["web-2"] != "canary" {
		t.Fatalf("the new state file holds %v, want the running moves", got)
	}
	if code, body := adminCall(t, pb, http.MethodDelete, "/admin/backends/web-2/pool", ""); code != 200 {
		t.Fatalf("clear after the reload: %d %s", code, body)
	}
	if got := moves(newState); len(got) != 1 || got["web-1"] != "unassigned" {
		t.Errorf("the new state file holds %v after the clear, want only web-1's move", got)
	}
	if got := moves(oldState); len(got) != 2 {
		t.Errorf("the old state file changed after the switch: %v", got)
	}
}
