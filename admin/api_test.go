package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"pollbal/configs"
	"pollbal/internal/store"
)

func TestAdminAPIStatusCodes(t *testing.T) {
	auth := bearer(testToken)
	big := `{"pool":"` + strings.Repeat("a", maxBodyBytes) + `"}`
	_, configErr := configs.Parse([]byte("site: x\nbogus: 1\n"))
	if configErr == nil {
		t.Fatal("want a configuration error to reload with")
	}
	tests := []struct {
		name      string
		opts      fixtureOptions
		method    string
		path      string
		auth      string
		body      string
		wantCode  int
		wantInErr string // substring of the JSON error; "" for success
		wantPool  string // backend web-1's pool/source afterwards; "" to skip
	}{
		// GET /admin/pools
		{name: "pools ok", method: "GET", path: "/admin/pools", auth: auth, wantCode: 200},
		{name: "pools without token", method: "GET", path: "/admin/pools", wantCode: 401, wantInErr: "bearer token"},
		{name: "pools wrong token", method: "GET", path: "/admin/pools", auth: bearer("nope"), wantCode: 401, wantInErr: "bearer token"},
		{name: "pools token as prefix", method: "GET", path: "/admin/pools", auth: bearer(testToken + "x"), wantCode: 401, wantInErr: "bearer token"},
		{name: "pools basic scheme", method: "GET", path: "/admin/pools", auth: "Basic " + testToken, wantCode: 401, wantInErr: "bearer token"},
		{name: "pools lower-case scheme", method: "GET", path: "/admin/pools", auth: "bearer " + testToken, wantCode: 200},
		{name: "pools no token_file", opts: fixtureOptions{noToken: true}, method: "GET", path: "/admin/pools", auth: auth, wantCode: 403, wantInErr: "token_file"},
		{name: "pools wrong method", method: "POST", path: "/admin/pools", auth: auth, wantCode: 405, wantInErr: "not allowed"},
		{name: "pools body too large", method: "GET", path: "/admin/pools", auth: auth, body: big, wantCode: 413, wantInErr: "over"},

		// PUT /admin/backends/{id}/pool
		{name: "move ok", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"unassigned"}`, wantCode: 200, wantPool: "unassigned/admin"},
		{name: "move in memory only", opts: fixtureOptions{stateFile: "-"}, method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"canary"}`, wantCode: 200, wantPool: "canary/admin"},
		{name: "move without token", method: "PUT", path: "/admin/backends/web-1/pool", body: `{"pool":"unassigned"}`, wantCode: 401, wantInErr: "bearer token", wantPool: "pool-acme/owner"},
		{name: "move no token_file", opts: fixtureOptions{noToken: true}, method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"unassigned"}`, wantCode: 403, wantInErr: "token_file", wantPool: "pool-acme/owner"},
		{name: "move bad json", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":`, wantCode: 400, wantInErr: "JSON", wantPool: "pool-acme/owner"},
		{name: "move no pool field", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{}`, wantCode: 400, wantInErr: "JSON", wantPool: "pool-acme/owner"},
		{name: "move unknown field", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"x","force":true}`, wantCode: 400, wantInErr: "JSON", wantPool: "pool-acme/owner"},
		{name: "move two documents", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"x"}{"pool":"y"}`, wantCode: 400, wantInErr: "JSON", wantPool: "pool-acme/owner"},
		{name: "move invalid pool name", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"Not A Pool"}`, wantCode: 400, wantInErr: "invalid pool name", wantPool: "pool-acme/owner"},
		{name: "move empty pool name", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":""}`, wantCode: 400, wantInErr: "invalid pool name", wantPool: "pool-acme/owner"},
		{name: "move unknown backend", method: "PUT", path: "/admin/backends/web-9/pool", auth: auth, body: `{"pool":"unassigned"}`, wantCode: 404, wantInErr: "unknown backend"},
		{name: "move body too large", method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: big, wantCode: 413, wantInErr: "over", wantPool: "pool-acme/owner"},
		{name: "move wrong method", method: "POST", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"unassigned"}`, wantCode: 405, wantInErr: "not allowed", wantPool: "pool-acme/owner"},
		{name: "move state dir missing", opts: fixtureOptions{stateFile: "/nonexistent-pollbal-dir/state.json"}, method: "PUT", path: "/admin/backends/web-1/pool", auth: auth, body: `{"pool":"unassigned"}`, wantCode: 500, wantInErr: "nothing changed", wantPool: "pool-acme/owner"},

		// DELETE /admin/backends/{id}/pool
		{name: "clear ok", opts: fixtureOptions{overrides: map[string]string{"web-1": "unassigned"}}, method: "DELETE", path: "/admin/backends/web-1/pool", auth: auth, wantCode: 200, wantPool: "pool-acme/owner"},
		{name: "clear without override", method: "DELETE", path: "/admin/backends/web-1/pool", auth: auth, wantCode: 200, wantPool: "pool-acme/owner"},
		{name: "clear wrong token", opts: fixtureOptions{overrides: map[string]string{"web-1": "unassigned"}}, method: "DELETE", path: "/admin/backends/web-1/pool", auth: bearer("x"), wantCode: 401, wantInErr: "bearer token", wantPool: "unassigned/admin"},
		{name: "clear no token_file", opts: fixtureOptions{noToken: true, overrides: map[string]string{"web-1": "unassigned"}}, method: "DELETE", path: "/admin/backends/web-1/pool", auth: auth, wantCode: 403, wantInErr: "token_file", wantPool: "unassigned/admin"},
		{name: "clear unknown backend", method: "DELETE", path: "/admin/backends/web-9/pool", auth: auth, wantCode: 404, wantInErr: "unknown backend"},
		{name: "clear body too large", opts: fixtureOptions{overrides: map[string]string{"web-1": "unassigned"}}, method: "DELETE", path: "/admin/backends/web-1/pool", auth: auth, body: big, wantCode: 413, wantInErr: "over", wantPool: "unassigned/admin"},
		{name: "clear state dir missing", opts: fixtureOptions{stateFile: "/nonexistent-pollbal-dir/state.json", overrides: map[string]string{"web-1": "unassigned"}}, method: "DELETE", path: "/admin/backends/web-1/pool", auth: auth, wantCode: 500, wantInErr: "nothing changed", wantPool: "unassigned/admin"},

		// POST /admin/reload
		{name: "reload ok", opts: fixtureOptions{reload: reloadWith(nil)}, method: "POST", path: "/admin/reload", auth: auth, wantCode: 200},
		{name: "reload rejected", opts: fixtureOptions{reload: reloadWith(configErr)}, method: "POST", path: "/admin/reload", auth: auth, wantCode: 500, wantInErr: "bogus"},
		{name: "reload not wired", method: "POST", path: "/admin/reload", auth: auth, wantCode: 501, wantInErr: "not available"},
		{name: "reload without token", opts: fixtureOptions{reload: reloadWith(nil)}, method: "POST", path: "/admin/reload", wantCode: 401, wantInErr: "bearer token"},
		{name: "reload no token_file", opts: fixtureOptions{noToken: true, reload: reloadWith(nil)}, method: "POST", path: "/admin/reload", auth: auth, wantCode: 403, wantInErr: "token_file"},
		{name: "reload wrong method", opts: fixtureOptions{reload: reloadWith(nil)}, method: "GET", path: "/admin/reload", auth: auth, wantCode: 405, wantInErr: "not allowed"},
		{name: "reload body too large", opts: fixtureOptions{reload: reloadWith(nil)}, method: "POST", path: "/admin/reload", auth: auth, body: big, wantCode: 413, wantInErr: "over"},

		// unknown paths under /admin/
		{name: "unknown admin path", method: "GET", path: "/admin/nothing", auth: auth, wantCode: 404, wantInErr: "no admin endpoint"},
		{name: "backends without id", method: "PUT", path: "/admin/backends//pool", auth: auth, body: `{"pool":"x"}`, wantCode: 404, wantInErr: "no admin endpoint"},
		{name: "unknown admin path needs token first", method: "GET", path: "/admin/nothing", wantCode: 401, wantInErr: "bearer token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			resp := f.do(t, tt.method, tt.path, tt.auth, tt.body)
			if resp.code != tt.wantCode {
				t.Fatalf("status = %d, want %d; body %s", resp.code, tt.wantCode, resp.body)
			}
			if ct := resp.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if tt.wantInErr != "" {
				if msg := errorOf(t, resp.body); !strings.Contains(msg, tt.wantInErr) {
					t.Errorf("error %q does not contain %q", msg, tt.wantInErr)
				}
			} else if !json.Valid([]byte(resp.body)) {
				t.Errorf("body %q is not JSON", resp.body)
			}
			if tt.wantCode == 401 && !strings.HasPrefix(resp.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer WWW-Authenticate challenge: %q", resp.header.Get("WWW-Authenticate"))
			}
			if tt.wantCode == 405 && resp.header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			if tt.wantPool != "" {
				if got := f.poolOf(t, "web-1"); got != tt.wantPool {
					t.Errorf("web-1 is in %s, want %s", got, tt.wantPool)
				}
			}
		})
	}
}

func TestListPools(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	resp := f.do(t, "GET", "/admin/pools", bearer(testToken), "")
	if resp.code != 200 {
		t.Fatalf("status %d: %s", resp.code, resp.body)
	}
	var got struct {
		Pools []struct {
			Name      string   `json:"name"`
			Backends  []string `json:"backends"`
			Apps      []string `json:"apps"`
			Scheduled bool     `json:"scheduled"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(resp.body), &got); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name      string
		backends  string
		apps      string
		scheduled bool
	}{
		{name: "default", backends: "web-3", apps: "blog", scheduled: true},
		{name: "canary", backends: "canary-1", apps: "", scheduled: false},
		{name: "pool-acme", backends: "web-1,web-2", apps: "shop", scheduled: true},
		{name: "unassigned", backends: "", apps: "", scheduled: false},
	}
	if len(got.Pools) != len(want) {
		t.Fatalf("got %d pools, want %d: %s", len(got.Pools), len(want), resp.body)
	}
	for i, w := range want {
		t.Run(w.name, func(t *testing.T) {
			p := got.Pools[i]
			if p.Name != w.name || strings.Join(p.Backends, ",") != w.backends ||
				strings.Join(p.Apps, ",") != w.apps || p.Scheduled != w.scheduled {
				t.Errorf("pool %d = %+v, want %+v", i, p, w)
			}
		})
	}
}

func TestMoveAnswerAndPersistence(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	steps := []struct {
		name       string
		method     string
		id         string
		body       string
		wantAnswer string // id/pool/source
		wantFile   map[string]string
	}{
		{name: "move web-1 out of scheduling", method: "PUT", id: "web-1", body: `{"pool":"unassigned"}`,
			wantAnswer: "web-1/unassigned/admin", wantFile: map[string]string{"web-1": "unassigned"}},
		{name: "move web-3 to the canary pool", method: "PUT", id: "web-3", body: `{"pool":"canary"}`,
			wantAnswer: "web-3/canary/admin", wantFile: map[string]string{"web-1": "unassigned", "web-3": "canary"}},
		{name: "move web-1 again", method: "PUT", id: "web-1", body: `{"pool":"pool-beta"}`,
			wantAnswer: "web-1/pool-beta/admin", wantFile: map[string]string{"web-1": "pool-beta", "web-3": "canary"}},
		{name: "return web-1 to its owner pool", method: "DELETE", id: "web-1",
			wantAnswer: "web-1/pool-acme/owner", wantFile: map[string]string{"web-3": "canary"}},
		{name: "return web-3 to default", method: "DELETE", id: "web-3",
			wantAnswer: "web-3/default/default", wantFile: map[string]string{}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			resp := f.do(t, st.method, "/admin/backends/"+st.id+"/pool", bearer(testToken), st.body)
			if resp.code != 200 {
				t.Fatalf("status %d: %s", resp.code, resp.body)
			}
			var a poolAnswer
			if err := json.Unmarshal([]byte(resp.body), &a); err != nil {
				t.Fatal(err)
			}
			if got := a.ID + "/" + a.Pool + "/" + a.PoolSource; got != st.wantAnswer {
				t.Errorf("answer %s, want %s", got, st.wantAnswer)
			}
			if got := a.Pool + "/" + a.PoolSource; got != f.poolOf(t, st.id) {
				t.Errorf("answer %s disagrees with the balancer %s", got, f.poolOf(t, st.id))
			}
			if got := stateFileOverrides(t, f.stateFile); !maps.Equal(got, st.wantFile) {
				t.Errorf("state file holds %s, want %s", fmtMap(got), fmtMap(st.wantFile))
			}
			if got := f.bal.Overrides(); !maps.Equal(got, st.wantFile) {
				t.Errorf("balancer holds %s, want %s", fmtMap(got), fmtMap(st.wantFile))
			}
		})
	}
	t.Run("a restart loads the moves", func(t *testing.T) {
		resp := f.do(t, "PUT", "/admin/backends/web-2/pool", bearer(testToken), `{"pool":"unassigned"}`)
		if resp.code != 200 {
			t.Fatalf("status %d: %s", resp.code, resp.body)
		}
		loaded, err := store.ReadState(f.stateFile)
		if err != nil {
			t.Fatal(err)
		}
		g := newFixture(t, fixtureOptions{overrides: loaded, stateFile: f.stateFile})
		if got := g.poolOf(t, "web-2"); got != "unassigned/admin" {
			t.Errorf("after restart web-2 is in %s, want unassigned/admin", got)
		}
	})
}

func TestAuditLine(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		auth       string
		body       string
		wantAction string
		wantTarget string
		wantStatus float64
		wantPool   string
		wantError  bool
	}{
		{name: "move", method: "PUT", path: "/admin/backends/web-2/pool", auth: bearer(testToken), body: `{"pool":"unassigned"}`,
			wantAction: "move", wantTarget: "web-2", wantStatus: 200, wantPool: "unassigned"},
		{name: "clear", method: "DELETE", path: "/admin/backends/web-2/pool", auth: bearer(testToken),
			wantAction: "clear_override", wantTarget: "web-2", wantStatus: 200},
		{name: "list pools", method: "GET", path: "/admin/pools", auth: bearer(testToken),
			wantAction: "list_pools", wantTarget: "", wantStatus: 200},
		{name: "rejected token", method: "PUT", path: "/admin/backends/web-1/pool", auth: bearer("guess"), body: `{"pool":"unassigned"}`,
			wantAction: "move", wantTarget: "web-1", wantStatus: 401, wantError: true},
		{name: "reload not wired", method: "POST", path: "/admin/reload", auth: bearer(testToken),
			wantAction: "reload", wantStatus: 501, wantError: true},
		{name: "unknown path", method: "GET", path: "/admin/x", auth: bearer(testToken),
			wantAction: "unknown", wantTarget: "/admin/x", wantStatus: 404, wantError: true},
		// Regression: the mux answered unclean paths with a redirect and no audit line.
		{name: "unclean path", method: "GET", path: "/admin/backends/web-1/../../pools", auth: bearer(testToken),
			wantAction: "unknown", wantTarget: "/admin/backends/web-1/../../pools", wantStatus: 404, wantError: true},
	}
	f := newFixture(t, fixtureOptions{})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.do(t, tt.method, tt.path, tt.auth, tt.body)
			recs := f.logs.Records(t, "admin call")
			if len(recs) != i+1 {
				t.Fatalf("%d audit lines after %d calls", len(recs), i+1)
			}
			rec := recs[i]
			if rec["level"] != "INFO" {
				t.Errorf("level %v, want INFO", rec["level"])
			}
			if remote, _ := rec["remote"].(string); !strings.HasPrefix(remote, "127.0.0.1:") {
				t.Errorf("remote %q, want the client's 127.0.0.1 address", remote)
			}
			checks := []struct {
				key  string
				want any
			}{
				{key: "method", want: tt.method},
				{key: "action", want: tt.wantAction},
				{key: "target", want: tt.wantTarget},
				{key: "status", want: tt.wantStatus},
			}
			for _, c := range checks {
				if rec[c.key] != c.want {
					t.Errorf("%s = %v, want %v (line %v)", c.key, rec[c.key], c.want, rec)
				}
			}
			if tt.wantPool != "" && rec["pool"] != tt.wantPool {
				t.Errorf("pool = %v, want %s", rec["pool"], tt.wantPool)
			}
			if _, has := rec["error"]; has != tt.wantError {
				t.Errorf("error attribute present = %v, want %v (line %v)", has, tt.wantError, rec)
			}
			if strings.Contains(fmt.Sprint(rec), testToken) {
				t.Error("the audit line leaks the token")
			}
		})
	}
}

func TestPrepareAndApply(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	dir := t.TempDir()
	newToken := filepath.Join(dir, "new-token")
	writeFile(t, newToken, "rotated\n")
	emptyToken := filepath.Join(dir, "empty-token")
	writeFile(t, emptyToken, " \n")
	steps := []struct {
		name      string
		tokenFile string
		wantErr   string
		wantCodes map[string]int // token → status of GET /admin/pools
	}{
		{name: "missing token file is rejected", tokenFile: filepath.Join(dir, "missing"), wantErr: "admin.token_file",
			wantCodes: map[string]int{testToken: 200, "rotated": 401}},
		{name: "empty token file is rejected", tokenFile: emptyToken, wantErr: "empty",
			wantCodes: map[string]int{testToken: 200}},
		{name: "token rotation", tokenFile: newToken,
			wantCodes: map[string]int{testToken: 401, "rotated": 200}},
		{name: "token_file removed", tokenFile: "",
			wantCodes: map[string]int{testToken: 403, "rotated": 403}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c, err := f.srv.Prepare(st.tokenFile, Limits{})
			if err == nil {
				f.srv.Apply(c)
			}
			switch {
			case st.wantErr == "" && err != nil:
				t.Fatalf("Prepare: %v", err)
			case st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)):
				t.Fatalf("Prepare error %v, want one containing %q", err, st.wantErr)
			}
			for token, want := range st.wantCodes {
				if resp := f.do(t, "GET", "/admin/pools", bearer(token), ""); resp.code != want {
					t.Errorf("token %q: status %d, want %d", token, resp.code, want)
				}
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	ok := newFixture(t, fixtureOptions{})
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n\t \n")
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "nil balancer", opts: Options{Warnings: ok.warnings, Gatherer: ok.reg}, wantErr: "nil balancer"},
		{name: "nil warnings", opts: Options{Balancer: ok.bal, Gatherer: ok.reg}, wantErr: "nil warnings"},
		{name: "nil events", opts: Options{Balancer: ok.bal, Warnings: ok.warnings, Gatherer: ok.reg}, wantErr: "nil events"},
		{name: "nil gatherer", opts: Options{Balancer: ok.bal, Warnings: ok.warnings, Events: ok.events}, wantErr: "nil gatherer"},
		{name: "nil store", opts: Options{Balancer: ok.bal, Warnings: ok.warnings, Events: ok.events, Gatherer: ok.reg}, wantErr: "nil store"},
		{name: "missing token file", opts: Options{Balancer: ok.bal, Warnings: ok.warnings, Events: ok.events, Gatherer: ok.reg, Store: ok.srv.store, TokenFile: filepath.Join(dir, "nope")}, wantErr: "admin.token_file"},
		{name: "empty token file", opts: Options{Balancer: ok.bal, Warnings: ok.warnings, Events: ok.events, Gatherer: ok.reg, Store: ok.srv.store, TokenFile: empty}, wantErr: "is empty"},
		{name: "token file is a directory", opts: Options{Balancer: ok.bal, Warnings: ok.warnings, Events: ok.events, Gatherer: ok.reg, Store: ok.srv.store, TokenFile: dir}, wantErr: "admin.token_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error %v, want one containing %q", err, tt.wantErr)
			}
			if errors.Unwrap(err) == nil && !strings.HasPrefix(tt.name, "nil ") {
				t.Errorf("error %v is not wrapped", err)
			}
		})
	}
}

// Regression: an override kept for a backend that a reload removed could not be dropped
// (DELETE answered 404), stayed in the state file, and came back silently when the id was reused.
func TestDeleteOrphanedOverride(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	if r := f.do(t, "PUT", "/admin/backends/web-2/pool", bearer(testToken), `{"pool":"canary"}`); r.code != 200 {
		t.Fatalf("move: %d %s", r.code, r.body)
	}
	cfg := testConfig()
	cfg.Backends = cfg.Backends[:1] // web-2 and the others are gone
	f.bal.Update(cfg)
	if r := f.do(t, "DELETE", "/admin/backends/web-2/pool", bearer(testToken), ""); r.code != 200 {
		t.Fatalf("DELETE of an orphaned override: %d %s, want 200", r.code, r.body)
	}
	if _, ok := f.bal.Overrides()["web-2"]; ok {
		t.Fatal("the orphaned override is still held")
	}
	if got := stateFileOverrides(t, f.stateFile); len(got) != 0 {
		t.Fatalf("state file still holds %v", got)
	}
	if r := f.do(t, "DELETE", "/admin/backends/web-2/pool", bearer(testToken), ""); r.code != 404 {
		t.Fatalf("second DELETE for an unknown backend: %d, want 404", r.code)
	}
	f.bal.Update(testConfig()) // web-2 comes back: in its configured pool, not canary
	if pool := f.poolOf(t, "web-2"); pool != "pool-acme/owner" {
		t.Fatalf("web-2 came back in %s, want pool-acme/owner", pool)
	}
}
