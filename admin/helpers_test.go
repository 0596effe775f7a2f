package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/alarms"
	"pollbal/internal/configtest"
	"pollbal/internal/store"
	"pollbal/internal/testproc"
	"pollbal/protocol"
	"pollbal/warning"
)

const testToken = "s3cret-token"

// testConfig is a small site: two backends owned by acme, one in default, one canary; the app
// shop (owner acme, fallback allowed) and blog (default).
func testConfig() *configs.Config {
	return configtest.New(
		[]configs.App{
			{Name: "shop", Hosts: []string{"shop.example.com"}, Owner: "acme"},
			{Name: "blog", Hosts: []string{"blog.example.com"}},
		},
		[]configs.Backend{
			{ID: "web-1", Address: "127.0.0.1:10001", Capacity: 8, Owner: "acme"},
			{ID: "web-2", Address: "127.0.0.1:10002", Capacity: 8, Owner: "acme"},
			{ID: "web-3", Address: "127.0.0.1:10003", Capacity: 4},
			{ID: "canary-1", Address: "127.0.0.1:10004", Capacity: 2, Pool: "canary"},
		},
		configtest.Site("test-site"), configtest.WarningThreshold(2))
}

// fixtureOptions tune newFixture.
type fixtureOptions struct {
	noToken   bool              // no token_file: /admin/* answers 403
	stateFile string            // "" → a file in a fresh temp dir; "-" → in memory only
	overrides map[string]string // initial overrides
	reload    func(ctx context.Context, force bool) error
	upgrade   func(ctx context.Context) (int, error)
	started   time.Time
	refresh   time.Duration
	config    *configs.Config // nil → testConfig()
	etcd      string          // an etcd endpoint: the moves live there; "" → in the state file
	store     store.Store     // a stand-in store of moves; nil → the one stateFile and etcd name
	limits    Limits          // for Serve
}

// fixture is an admin server on 127.0.0.1 over a real balancer.
type fixture struct {
	bal       *balancer.Balancer
	events    *alarms.Events // the status page's events, as cmd/pollbal wires them
	warnings  *warning.Tracker
	reg       *prometheus.Registry
	srv       *Server
	ts        *httptest.Server
	tokenFile string
	stateFile string
	logs      *logBuffer
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{reg: prometheus.NewRegistry(), logs: &logBuffer{}}
	cfg := o.config
	if cfg == nil {
		cfg = testConfig()
	}
	// No webhook is configured: alarms are listed, never posted.
	notifier, err := alarms.New(alarms.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Close)
	f.events = notifier.Events()
	bal, err := balancer.New(balancer.Options{
		Config: cfg, Overrides: o.overrides, Registerer: f.reg, Observer: notifier, Events: f.events,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.bal = bal
	f.warnings, err = warning.NewTracker(warning.TrackerOptions{
		Members: bal, Events: f.events, Config: cfg,
		SenderOptions: warning.SenderOptions{Site: cfg.Site, Timeout: cfg.Warning.Timeout, Registerer: f.reg},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.warnings.Close)
	if !o.noToken {
		f.tokenFile = filepath.Join(dir, "token")
		writeFile(t, f.tokenFile, "  "+testToken+"\n")
	}
	switch o.stateFile {
	case "":
		f.stateFile = filepath.Join(dir, "state.json")
	case "-":
	default:
		f.stateFile = o.stateFile
	}
	log := slog.New(slog.NewJSONHandler(f.logs, nil))
	moves := o.store
	if moves == nil {
		var etcd *configs.Etcd
		if o.etcd != "" {
			etcd = &configs.Etcd{Endpoints: []string{o.etcd}, Prefix: "/t/", DialTimeout: 200 * time.Millisecond}
		}
		moves, err = store.New(store.Options{
			StateFile: f.stateFile, Etcd: etcd, Initial: o.overrides, Target: bal, Alarms: notifier, Events: f.events, Logger: log, Registerer: f.reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { moves.Close() })
	}
	f.srv, err = New(Options{
		Balancer: bal, Warnings: f.warnings, Events: f.events, Version: "v1.2.3-test", Gatherer: f.reg, TokenFile: f.tokenFile, Store: moves,
		Reload: o.reload, Upgrade: o.upgrade, Started: o.started, Logger: log, Refresh: o.refresh, Limits: o.limits, Registerer: f.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(f.srv.Handler()) // listens on 127.0.0.1:0
	t.Cleanup(f.ts.Close)
	return f
}

// markReady reports backends ready and serving web v1.
func (f *fixture) markReady(ids ...string) {
	for _, id := range ids {
		f.bal.Observe(balancer.Observation{
			ID: id, Ready: true, Checked: time.Now(),
			Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}},
		})
	}
}

// decideWarnings runs one warning round, as the server does after each check round.
func (f *fixture) decideWarnings() {
	f.warnings.Round()
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   string
}

// do sends a request; auth "" sends no Authorization header.
func (f *fixture) do(t *testing.T, method, path, auth, body string) response {
	t.Helper()
	resp, err := f.send(method, path, auth, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// send is do for goroutines other than the test's.
func (f *fixture) send(method, path, auth, body string) (response, error) {
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{code: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

func bearer(token string) string { return "Bearer " + token }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// poolOf returns a backend's current pool and source.
func (f *fixture) poolOf(t *testing.T, id string) string {
	t.Helper()
	pool, source, ok := f.bal.Snapshot().PoolOf(id)
	if !ok {
		t.Fatalf("backend %s unknown", id)
	}
	return pool + "/" + source
}

// logBuffer collects log output; it is safe for concurrent use.
type logBuffer struct{ testproc.Buffer }

// errorOf decodes a JSON error body.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if e.Error == "" {
		t.Fatalf("error body %q has no error text", body)
	}
	return e.Error
}

// stateFileOverrides reads the state file's moves as the next start would.
func stateFileOverrides(t *testing.T, path string) store.Moves {
	t.Helper()
	got, err := store.ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func fmtMap(m map[string]string) string { return fmt.Sprint(m) }
