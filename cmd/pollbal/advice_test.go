package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"pollbal/configs"
)

// Issue 28: an admin listener open to other hosts exposed the unauthenticated status page,
// state and metrics without a word. The configurations are only parsed: the tests listen on
// 127.0.0.1 only, so the warning is checked here, on the function run and reload call.
func TestWarnAbout(t *testing.T) {
	parse := func(admin string) *configs.Config {
		t.Helper()
		c, err := configs.Parse([]byte("site: t\nadmin:\n" + admin + "services: {web: {}}\napps: [{name: www, hosts: ['*']}]\nbackends: [{address: 127.0.0.1:9001}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	loopback := parse("  listen: 127.0.0.1:9090\n")
	exposed := parse("  listen: 0.0.0.0:9090\n")
	withToken := parse("  listen: 0.0.0.0:9090\n  token_file: /etc/pollbal/token\n")
	const warning = "admin.listen 0.0.0.0:9090 is not a loopback address and admin.token_file is not set: the unauthenticated status page, state (/api/state) and metrics (/metrics) are exposed"
	for _, tc := range []struct {
		name      string
		prev, cfg *configs.Config
		warns     bool
	}{
		{name: "start on loopback", cfg: loopback},
		{name: "start exposed", cfg: exposed, warns: true},
		{name: "start exposed with a token", cfg: withToken},
		{name: "a reload that drops the token", prev: withToken, cfg: exposed, warns: true},
		{name: "a reload that keeps it exposed says it once, at start", prev: exposed, cfg: exposed},
		{name: "a reload that adds a token", prev: exposed, cfg: withToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged strings.Builder
			s := &server{log: slog.New(slog.NewTextHandler(&logged, nil))}
			s.warnAbout(tc.prev, tc.cfg)
			if got := strings.Contains(logged.String(), "level=WARN") && strings.Contains(logged.String(), warning); got != tc.warns {
				t.Fatalf("logged %q; want the warning: %v", logged.String(), tc.warns)
			}
		})
	}
}

// Issue 28: a configuration with no app and no backend passed check without a word; run starts
// with it (a reload can add them) and says what it serves: nothing.
func TestRunWarnsWhenItServesNothing(t *testing.T) {
	pb := startPollbal(t, "site: e2e\nlisten: LISTEN\nadmin: {listen: ADMIN}\nservices: {web: {}}\n")
	for _, want := range []string{
		`level=WARN msg="apps: none: every request would be answered 404 (no_app); declare at least one app"`,
		`level=WARN msg="backends: none: every request would be answered 503; list at least one backend"`,
	} {
		pb.WaitOutput(t, 10*time.Second, "the warning", want)
	}
	var stdout, stderr strings.Builder
	if code := realMain([]string{"check", "-config", pb.cfgPath}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stdout.String(), "apps: none:") || !strings.Contains(stdout.String(), "backends: none:") {
		t.Fatalf("pollbal check: exit %d, %q; want 1 and both problems", code, stdout.String())
	}
}
