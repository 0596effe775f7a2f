package admin

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"pollbal/balancer"
	"pollbal/protocol"
)

// sectionRe cuts the page into pool sections: data-pool and the section's HTML.
var sectionRe = regexp.MustCompile(`(?s)<section class="pool[^"]*" data-pool="([^"]+)".*?</section>`)

func poolSections(t *testing.T, page string) (order []string, html map[string]string) {
	t.Helper()
	html = map[string]string{}
	for _, m := range sectionRe.FindAllStringSubmatch(page, -1) {
		order = append(order, m[1])
		html[m[1]] = m[0]
	}
	if len(order) == 0 {
		t.Fatalf("no pool sections in the page:\n%.2000s", page)
	}
	return order, html
}

func TestStatusPage(t *testing.T) {
	f := newFixture(t, fixtureOptions{overrides: map[string]string{"web-2": "unassigned"}})
	f.markReady("web-1", "web-2")
	hostile := `<script>alert("pwned")</script><img src=x onerror=alert(1)>`
	f.bal.Observe(balancer.Observation{ID: "web-3", Ready: false, Reason: hostile, Checked: time.Now()})
	f.decideWarnings()
	f.bal.RoundDone()
	resp := f.do(t, "GET", "/", "", "")
	if resp.code != 200 {
		t.Fatalf("status %d", resp.code)
	}
	page := resp.body
	order, sections := poolSections(t, page)
	if got, want := strings.Join(order, ","), "default,canary,pool-acme,unassigned"; got != want {
		t.Errorf("pools in order %s, want %s", got, want)
	}
	tests := []struct {
		name    string
		in      string // "" for the whole page, else a pool
		want    []string
		notWant []string
	}{
		{name: "site and version", want: []string{"test-site", "v1.2.3-test"}},
		{name: "web-1 under pool-acme, ready, owner source", in: "pool-acme",
			want: []string{`data-backend="web-1"`, `data-ready="true"`, "web serving v1", ">owner<", "0 / 8"}},
		{name: "moved web-2 under unassigned with admin source", in: "unassigned",
			want: []string{`data-backend="web-2"`, ">admin<", "never scheduled"}, notWant: []string{`data-backend="web-1"`}},
		{name: "web-3 under default, not ready", in: "default", want: []string{`data-backend="web-3"`, `data-ready="false"`, "not ready"}},
		{name: "canary pool is not scheduled", in: "canary", want: []string{`data-backend="canary-1"`, "not scheduled"}},
		{name: "hostile reason is escaped", in: "default",
			want:    []string{"&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"},
			notWant: []string{hostile, "<script>alert", "<img src=x"}},
		{name: "apps with resolution, fallback and candidates",
			want: []string{`data-app="shop"`, "owner", "allowed", `data-app="blog"`}},
		{name: "warning group (web-2 moved away leaves web-1 alone under threshold 2)",
			want: []string{`class="group"`, "pool-acme", ">web-1</span>"}},
		{name: "events", want: []string{`class="event" data-kind="ready"`, "backend web-1 is ready"}},
		{name: "move form", want: []string{`id="move-token"`, `id="move-backend"`, `id="move-pool"`, `id="move-submit"`, `id="move-result"`,
			`<option value="web-1">`, `<option value="unassigned">`}},
		{name: "no external assets", notWant: []string{"http://", "https://", "<link rel=\"stylesheet\"", "src=\"/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			html := page
			if tt.in != "" {
				html = sections[tt.in]
			}
			for _, w := range tt.want {
				if !strings.Contains(html, w) {
					t.Errorf("missing %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(html, w) {
					t.Errorf("must not contain %q", w)
				}
			}
		})
	}
	t.Run("headers", func(t *testing.T) {
		csp := resp.header.Get("Content-Security-Policy")
		m := regexp.MustCompile(`script-src 'nonce-([^']+)'`).FindStringSubmatch(csp)
		if m == nil {
			t.Fatalf("CSP %q has no script nonce", csp)
		}
		if !strings.Contains(page, fmt.Sprintf(`<script nonce="%s">`, m[1])) {
			t.Error("the inline script does not carry the CSP nonce")
		}
		if strings.Count(page, "<script") != 1 {
			t.Errorf("%d script elements, want the one inline script", strings.Count(page, "<script"))
		}
		if got := resp.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q", got)
		}
	})
}

func TestStatusPageEventsCapped(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for i := range 150 {
		f.events.Add("admin_move", fmt.Sprintf("event number %d", i))
	}
	page := f.do(t, "GET", "/", "", "").body
	tests := []struct {
		name string
		want int
		sub  string
	}{
		{name: "at most 100 events", sub: `class="event"`, want: maxPageEvents},
		{name: "newest shown", sub: "event number 149<", want: 1},
		{name: "older than the last 100 not shown", sub: "event number 49<", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Count(page, tt.sub); got != tt.want {
				t.Errorf("%q appears %d times, want %d", tt.sub, got, tt.want)
			}
		})
	}
}

func TestBuildViewRefresh(t *testing.T) {
	tests := []struct {
		name        string
		refresh     time.Duration
		wantMS      int64
		wantSeconds int64
		wantText    string
	}{
		{name: "default", refresh: defaultRefresh, wantMS: 2000, wantSeconds: 2, wantText: "2s"},
		{name: "sub-second still refreshes without script once a second", refresh: 200 * time.Millisecond, wantMS: 200, wantSeconds: 1, wantText: "200ms"},
		{name: "minutes and seconds", refresh: 90 * time.Second, wantMS: 90000, wantSeconds: 90, wantText: "1m30s"},
		{name: "whole minutes", refresh: 2 * time.Minute, wantMS: 120000, wantSeconds: 120, wantText: "2m"},
		{name: "whole hours", refresh: time.Hour, wantMS: 3600000, wantSeconds: 3600, wantText: "1h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := buildView(State{}, time.Unix(0, 0), tt.refresh)
			if v.RefreshMS != tt.wantMS || v.RefreshSeconds != tt.wantSeconds || v.RefreshText != tt.wantText {
				t.Errorf("refresh %d ms / %d s / %q, want %d / %d / %q",
					v.RefreshMS, v.RefreshSeconds, v.RefreshText, tt.wantMS, tt.wantSeconds, tt.wantText)
			}
		})
	}
}

// TestNonceSurvivesTemplateEscaping is the regression test for a nonce with "+" that
// html/template escaped, so the script no longer matched the CSP header and did not run.
func TestNonceSurvivesTemplateEscaping(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{24}$`)
	seen := map[string]bool{}
	for range 200 {
		n := nonce()
		if !valid.MatchString(n) {
			t.Fatalf("nonce %q has characters html/template escapes", n)
		}
		seen[n] = true
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct nonces out of 200", len(seen))
	}
}

// TestStatusPageFleet checks that a backend's row shows this instance's in-flight against its
// limit, and the fleet's in-flight (the backend's own report) against the capacity.
func TestStatusPageFleet(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.markReady("web-1", "web-3")
	now := time.Now()
	f.bal.Observe(balancer.Observation{ID: "web-1", Ready: true, Checked: now, Load: &protocol.Load{InFlight: 5, At: now},
		Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}})
	f.bal.RoundDone()
	resp := f.do(t, "GET", "/", "", "")
	if resp.code != 200 {
		t.Fatalf("status %d", resp.code)
	}
	_, sections := poolSections(t, resp.body)
	for _, tt := range []struct {
		name, pool string
		want       []string
	}{
		{name: "reporting backend: mine / limit, then the fleet's / capacity", pool: "pool-acme",
			want: []string{"0 / 3", "fleet 5 / 8"}},
		{name: "backend without a report", pool: "default", want: []string{"no load report"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, w := range tt.want {
				if !strings.Contains(sections[tt.pool], w) {
					t.Errorf("pool %s misses %q:\n%s", tt.pool, w, sections[tt.pool])
				}
			}
		})
	}
}
