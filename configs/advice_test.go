package configs

import (
	"strings"
	"testing"
)

func TestLoopbackOnly(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:9090":        true,
		"127.1.2.3:9090":        true,
		"[::1]:9090":            true,
		"localhost:9090":        true,
		"[::ffff:127.0.0.1]:90": true,
		":9090":                 false,
		"0.0.0.0:9090":          false,
		"[::]:9090":             false,
		"10.0.0.5:9090":         false,
		"admin.example.com:90":  false,
		"garbage":               false,
	} {
		if got := loopbackOnly(listen); got != want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", listen, got, want)
		}
	}
}

// Issue 28: admin.listen on a public address exposed the status page, state and metrics
// without a word.
func TestAdminExposure(t *testing.T) {
	for _, tc := range []struct {
		name, admin string
		warn        bool
	}{
		{name: "loopback", admin: "  listen: 127.0.0.1:9090\n"},
		{name: "every interface", admin: "  listen: :9090\n", warn: true},
		{name: "a public address", admin: "  listen: 192.0.2.10:9090\n", warn: true},
		{name: "a public address with a token", admin: "  listen: 192.0.2.10:9090\n  token_file: /etc/pollbal/token\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(baseYAML + "admin:\n" + tc.admin))
			if err != nil {
				t.Fatal(err)
			}
			got := AdminExposure(c)
			if !tc.warn {
				if got != "" {
					t.Fatalf("warning %q, want none", got)
				}
				return
			}
			for _, want := range []string{"admin.listen " + c.Admin.Listen + " is not a loopback address", "status page", "/api/state", "/metrics"} {
				if !strings.Contains(got, want) {
					t.Errorf("warning %q lacks %q", got, want)
				}
			}
		})
	}
}

// Issue 28: a configuration with no app and no backend passed `pollbal check`.
func TestUnserved(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{name: "apps and backends", doc: baseYAML},
		{name: "neither", doc: "site: test\nservices: {web: {}}\n", want: []string{
			"apps: none: every request would be answered 404 (no_app); declare at least one app",
			"backends: none: every request would be answered 503; list at least one backend"}},
		{name: "no backend", doc: "site: test\nservices: {web: {}}\napps: [{name: www, hosts: ['*']}]\n", want: []string{
			"backends: none: every request would be answered 503; list at least one backend"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range Unserved(c) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("Unserved = %q, want %q", got, tc.want)
			}
		})
	}
}
