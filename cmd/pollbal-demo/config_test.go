package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"pollbal/configs"
	"pollbal/internal/cmdline"
)

func TestRewriteConfig(t *testing.T) {
	t.Parallel()
	shipped := configs.Shipped()["demo.yaml"]
	if shipped == nil {
		t.Fatal("no shipped demo.yaml")
	}
	tests := []struct {
		name         string
		data         []byte
		rw           rewrite
		wantListen   string
		wantAdmin    string
		wantBackends []string
		wantScope    string // of service web
		wantComment  string
	}{
		{
			name: "shipped demo, offset 1000, scope service",
			data: shipped, rw: rewrite{Addr: shiftPort(1000), Scope: configs.ScopeService, Note: "line one\nline two"},
			wantListen: "127.0.0.1:19080", wantAdmin: "127.0.0.1:20090",
			wantBackends: []string{"127.0.0.1:20101", "127.0.0.1:20102", "127.0.0.1:20103", "127.0.0.1:20104"},
			wantScope:    configs.ScopeService, wantComment: "# line one\n# line two\n",
		},
		{
			name: "shipped demo as is",
			data: shipped, rw: rewrite{Addr: shiftPort(0)},
			wantListen: "127.0.0.1:18080", wantAdmin: "127.0.0.1:19090",
			wantBackends: []string{"127.0.0.1:19101", "127.0.0.1:19102", "127.0.0.1:19103", "127.0.0.1:19104"},
			wantScope:    configs.ScopeService, wantComment: "# demo.yaml",
		},
		{
			name: "free ports, same address twice gets the same port",
			data: []byte("site: s\nservices:\n  web:\nbackends:\n  - id: a\n    address: 127.0.0.1:1\n  - id: b\n    address: 127.0.0.1:2\napps:\n  - name: x\n    hosts: [\"*\"]\n"),
			rw:   rewrite{Addr: assignPorts([]int{5001, 5002, 5003, 5004}), Scope: configs.ScopeService},
			// listen and admin.listen are not in the file: their defaults are remapped and written.
			wantListen: "127.0.0.1:5001", wantAdmin: "127.0.0.1:5002",
			wantBackends: []string{"127.0.0.1:5003", "127.0.0.1:5004"},
			wantScope:    configs.ScopeService,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := rewriteConfig(tc.data, tc.rw)
			if err != nil {
				t.Fatal(err)
			}
			c, err := configs.Parse(out)
			if err != nil {
				t.Fatalf("rewritten config does not parse: %v\n%s", err, out)
			}
			var backends []string
			for _, b := range c.Backends {
				backends = append(backends, b.Address)
			}
			got := []any{c.Listen, c.Admin.Listen, backends, c.Services["web"].WarningScope}
			want := []any{tc.wantListen, tc.wantAdmin, tc.wantBackends, tc.wantScope}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if !strings.Contains(string(out), tc.wantComment) {
				t.Errorf("comment %q missing:\n%s", tc.wantComment, out)
			}
		})
	}
}

func TestRewriteConfigKeepsEverythingElse(t *testing.T) {
	t.Parallel()
	shipped := configs.Shipped()["demo.yaml"]
	before, err := configs.Parse(shipped)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rewriteConfig(shipped, rewrite{Addr: shiftPort(7)})
	if err != nil {
		t.Fatal(err)
	}
	after, err := configs.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		before, after any
	}{
		{name: "site", before: before.Site, after: after.Site},
		{name: "poll", before: before.Poll, after: after.Poll},
		{name: "services", before: before.Services, after: after.Services},
		{name: "apps", before: before.Apps, after: after.Apps},
		{name: "backend count", before: len(before.Backends), after: len(after.Backends)},
		{name: "first backend id", before: before.Backends[0].ID, after: after.Backends[0].ID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.before, tc.after) {
				t.Errorf("changed from %+v to %+v", tc.before, tc.after)
			}
		})
	}
}

func TestRewriteConfigErrors(t *testing.T) {
	t.Parallel()
	shipped := configs.Shipped()["demo.yaml"]
	tests := []struct {
		name    string
		data    []byte
		rw      rewrite
		wantErr string
	}{
		{name: "port out of range", data: shipped, rw: rewrite{Addr: shiftPort(60000)}, wantErr: "out of range"},
		{name: "not enough free ports", data: shipped, rw: rewrite{Addr: assignPorts([]int{1, 2, 3})}, wantErr: "no free port left"},
		{name: "invalid config", data: []byte("site: [\n"), rw: rewrite{Addr: shiftPort(0)}, wantErr: "parse demo config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rewriteConfig(tc.data, tc.rw)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewPlan(t *testing.T) {
	t.Parallel()
	c, err := configs.Parse(configs.Shipped()["demo.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	want := plan{
		Site: "demo", Proxy: "127.0.0.1:18080", Admin: "127.0.0.1:19090", Service: "web", Threshold: 1,
		Backends: []planBackend{
			{ID: "web-1", Address: "127.0.0.1:19101", Pool: "pool-acme"},
			{ID: "web-2", Address: "127.0.0.1:19102", Pool: "pool-acme"},
			{ID: "web-3", Address: "127.0.0.1:19103", Pool: "default"},
			{ID: "web-4", Address: "127.0.0.1:19104", Pool: "default"},
		},
		Pools: []string{"default", "pool-acme"},
		Hosts: []string{"shop.localhost", "www.localhost"},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("plan = %+v\nwant   %+v", p, want)
	}
}

func TestClientHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, want string
	}{
		{name: "exact", pattern: "shop.localhost", want: "shop.localhost"},
		{name: "wildcard", pattern: "*.shop.example.com", want: "demo.shop.example.com"},
		{name: "catch-all", pattern: "*", want: "www.localhost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := clientHost(tc.pattern); got != tc.want {
				t.Errorf("clientHost(%q) = %q, want %q", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantErr     error
		wantRounds  int
		wantTiming  string
		wantOffset  int
		wantViaMake bool
	}{
		{name: "defaults", wantRounds: 1, wantTiming: "normal"},
		{name: "flags", args: []string{"-rounds", "2", "-timings", "fast", "-port-offset", "1000"}, wantRounds: 2, wantTiming: "fast", wantOffset: 1000},
		{name: "DEMO_ROUNDS overrides -rounds", args: []string{"-rounds", "2"}, env: map[string]string{"DEMO_ROUNDS": "3"}, wantRounds: 3, wantTiming: "normal"},
		{name: "bad DEMO_ROUNDS", env: map[string]string{"DEMO_ROUNDS": "many"}, wantErr: cmdline.ErrUsage},
		{name: "zero rounds", args: []string{"-rounds", "0"}, wantErr: cmdline.ErrUsage},
		{name: "unknown timings", args: []string{"-timings", "slow"}, wantErr: cmdline.ErrUsage},
		{name: "offset with free ports", args: []string{"-ports-from-config=false", "-port-offset", "5"}, wantErr: cmdline.ErrUsage},
		{name: "unknown scope", args: []string{"-warning-scope", "pool"}, wantErr: cmdline.ErrUsage},
		{name: "stray argument", args: []string{"now"}, wantErr: cmdline.ErrUsage},
		{name: "run by make", env: map[string]string{"DEMO_VIA_MAKE": "1"}, wantRounds: 1, wantTiming: "normal", wantViaMake: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			o, err := parseOptions(tc.args, func(k string) string { return tc.env[k] }, &stderr)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v (stderr %q)", err, tc.wantErr, stderr.String())
			}
			if tc.wantErr != nil {
				if stderr.Len() == 0 {
					t.Error("usage error without a message")
				}
				return
			}
			if o.ViaMake != tc.wantViaMake {
				t.Errorf("ViaMake = %v, want %v", o.ViaMake, tc.wantViaMake)
			}
			if o.Rounds != tc.wantRounds || o.Timings.Name != tc.wantTiming || o.PortOffset != tc.wantOffset {
				t.Errorf("got rounds %d timings %s offset %d, want %d %s %d",
					o.Rounds, o.Timings.Name, o.PortOffset, tc.wantRounds, tc.wantTiming, tc.wantOffset)
			}
		})
	}
}

// Issue 28: the busy-port hint said -port-offset 1000 to someone who ran make demo, where
// the flag goes in DEMO_FLAGS.
func TestFlagAdvice(t *testing.T) {
	for _, tc := range []struct {
		viaMake bool
		want    string
	}{
		{viaMake: false, want: "-port-offset 1000"},
		{viaMake: true, want: `make demo DEMO_FLAGS="-port-offset 1000"`},
	} {
		if got := flagAdvice("-port-offset 1000", tc.viaMake); got != tc.want {
			t.Errorf("flagAdvice(viaMake %v) = %q, want %q", tc.viaMake, got, tc.want)
		}
	}
}
