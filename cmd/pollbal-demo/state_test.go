package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"pollbal/internal/testbackend/api"
)

// be builds one backend of a state sample: status "" means no report, "down" not ready.
func be(id, pool, status, version string) apiBackend {
	b := apiBackend{ID: id, Pool: pool, Ready: true}
	switch status {
	case "":
	case "down":
		b.Ready = false
		b.Reports = []apiReport{{Service: "web", Status: statusServing, Version: version}}
	default:
		b.Reports = []apiReport{{Service: "web", Status: status, Version: version}}
	}
	return b
}

func TestCountPools(t *testing.T) {
	t.Parallel()
	ejected := be("web-4", "default", statusServing, "v1")
	ejected.Ejected = true
	tests := []struct {
		name     string
		backends []apiBackend
		want     map[string]poolCount
	}{
		{
			name:     "all serving",
			backends: []apiBackend{be("web-1", "pool-acme", statusServing, "v1"), be("web-3", "default", statusServing, "v1")},
			want:     map[string]poolCount{"pool-acme": {Serving: 1}, "default": {Serving: 1}},
		},
		{
			name: "leaving, out of rotation, down and ejected",
			backends: []apiBackend{
				be("web-1", "pool-acme", statusLeaving, "v1"), be("web-2", "pool-acme", "", ""),
				be("web-3", "default", "down", "v1"), ejected,
			},
			want: map[string]poolCount{"pool-acme": {Leaving: 1}, "default": {}},
		},
		{
			name:     "untracked pool and other service ignored",
			backends: []apiBackend{be("x", "canary", statusServing, "v1"), {ID: "y", Pool: "default", Ready: true, Reports: []apiReport{{Service: "api", Status: statusServing}}}},
			want:     map[string]poolCount{"pool-acme": {}, "default": {}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := countPools(apiState{Backends: tc.backends}, "web", []string{"default", "pool-acme"})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTracker(t *testing.T) {
	t.Parallel()
	sample := func(bs ...apiBackend) apiState { return apiState{Backends: bs} }
	tests := []struct {
		name    string
		samples []apiState
		want    []poolMin
	}{
		{
			name: "one announces, drains and comes back",
			samples: []apiState{
				sample(be("a", "p", statusServing, "v1"), be("b", "p", statusServing, "v1")),
				sample(be("a", "p", statusLeaving, "v1"), be("b", "p", statusServing, "v1")),
				sample(be("a", "p", "", ""), be("b", "p", statusServing, "v1")),
				sample(be("a", "p", statusServing, "v2"), be("b", "p", statusServing, "v1")),
			},
			want: []poolMin{{Pool: "p", Threshold: 1, Serving: 1, InService: 1, LeavingAtMin: 1}},
		},
		{
			name: "both announce at once: none serving, both still in service",
			samples: []apiState{
				sample(be("a", "p", statusServing, "v1"), be("b", "p", statusServing, "v1")),
				sample(be("a", "p", statusLeaving, "v1"), be("b", "p", statusLeaving, "v1")),
				sample(be("a", "p", statusServing, "v1"), be("b", "p", statusServing, "v1")),
			},
			want: []poolMin{{Pool: "p", Threshold: 1, Serving: 0, InService: 2, LeavingAtMin: 2}},
		},
		{
			name: "both down",
			samples: []apiState{
				sample(be("a", "p", statusServing, "v1"), be("b", "p", statusServing, "v1")),
				sample(be("a", "p", "down", "v1"), be("b", "p", "", "")),
			},
			want: []poolMin{{Pool: "p", Threshold: 1, Serving: 0, InService: 0, LeavingAtMin: 0}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker("web", 1, []string{"p"})
			for _, s := range tc.samples {
				tr.observe(s)
			}
			got, n := tr.result()
			if n != len(tc.samples) {
				t.Errorf("samples = %d, want %d", n, len(tc.samples))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAllOn(t *testing.T) {
	t.Parallel()
	s := apiState{Backends: []apiBackend{be("a", "p", statusServing, "v2"), be("b", "p", statusLeaving, "v2"), be("c", "p", "down", "v2")}}
	tests := []struct {
		name string
		ids  []string
		want bool
	}{
		{name: "serving the version", ids: []string{"a"}, want: true},
		{name: "leaving does not count", ids: []string{"a", "b"}, want: false},
		{name: "not ready does not count", ids: []string{"c"}, want: false},
		{name: "unknown backend", ids: []string{"z"}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := allOn(s, "web", "v2", tc.ids); got != tc.want {
				t.Errorf("allOn(%v) = %t, want %t", tc.ids, got, tc.want)
			}
		})
	}
}

func TestNotUpdated(t *testing.T) {
	t.Parallel()
	final := &apiState{Backends: []apiBackend{be("a", "p", statusServing, "v2"), be("b", "p", statusServing, "v1")}}
	tests := []struct {
		name  string
		end   scriptEnd
		final *apiState
		want  string
	}{
		{name: "exited 0 and serving the new version", end: scriptEnd{id: "a"}, final: final, want: ""},
		{
			name: "still running wins over everything",
			end:  scriptEnd{id: "a", running: true, code: -1, last: "draining"}, final: final,
			want: "update script still running when the demo stopped (last: draining)",
		},
		{
			name: "failed script", end: scriptEnd{id: "a", code: 3, last: "updating"}, final: final,
			want: "update script exited with status 3 (last: updating)",
		},
		{name: "state unknown", end: scriptEnd{id: "a"}, final: nil, want: "pollbal's state is unknown"},
		{name: "still on the old version", end: scriptEnd{id: "b"}, final: final, want: "pollbal does not show it ready and serving v2"},
		{name: "not in the state", end: scriptEnd{id: "z"}, final: final, want: "pollbal does not show it ready and serving v2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := notUpdated(tc.end, tc.final, "web"); got != tc.want {
				t.Errorf("notUpdated = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSummaryProblems(t *testing.T) {
	t.Parallel()
	good := summary{
		Served: 100, Backends: 4, Updated: 4, NewVersion: "v2", Rounds: 1, Samples: 50,
		Pools: []poolMin{{Pool: "default", Threshold: 1, Serving: 0, InService: 2}, {Pool: "pool-acme", Threshold: 1, Serving: 1, InService: 1}},
	}
	tests := []struct {
		name   string
		change func(s *summary)
		want   []string
	}{
		{name: "everything fine", change: func(*summary) {}},
		{name: "a failed request", change: func(s *summary) { s.Failed = 1 }, want: []string{"1 requests failed"}},
		{name: "a backend not updated", change: func(s *summary) { s.Updated = 3 }, want: []string{"only 3/4 backends updated to v2"}},
		{name: "a pool emptied", change: func(s *summary) { s.Pools[1].InService = 0 }, want: []string{"pool pool-acme dropped to 0 in service (threshold 1)"}},
		{name: "interrupted", change: func(s *summary) { s.Stopped = "interrupted" }, want: []string{"interrupted"}},
		{name: "never sampled", change: func(s *summary) { s.Samples = 0 }, want: []string{"pollbal's state was never sampled"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.Pools = append([]poolMin(nil), good.Pools...)
			tc.change(&s)
			if got := s.problems(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems = %q, want %q", got, tc.want)
			}
			var out strings.Builder
			writeSummary(&out, s)
			wantResult := "result: ok\n"
			if len(tc.want) > 0 {
				wantResult = "result: FAILED\n"
			}
			if !strings.Contains(out.String(), wantResult) {
				t.Errorf("summary lacks %q:\n%s", wantResult, out.String())
			}
		})
	}
}

func TestRenderView(t *testing.T) {
	t.Parallel()
	p := plan{Service: "web", Pools: []string{"default", "pool-acme"}, Threshold: 1, Backends: []planBackend{
		{ID: "web-1", Pool: "pool-acme"}, {ID: "web-3", Pool: "default"},
	}}
	state := &apiState{Backends: []apiBackend{be("web-1", "pool-acme", statusLeaving, "v1"), be("web-3", "default", "", "")}}
	state.Backends[0].Warned, state.Backends[0].InFlight = true, 3
	tests := []struct {
		name      string
		state     *apiState
		stats     map[string]*api.Stats
		wantLines []string
	}{
		{
			name: "before pollbal answered", stats: map[string]*api.Stats{},
			wantLines: []string{"web-1    pool-acme  ?        -        -               0         ?", "pools: default 0 serving + 0 leaving"},
		},
		{
			name: "leaving and warned, out of rotation", state: state,
			stats: map[string]*api.Stats{"web-1": {Requests: 42}},
			wantLines: []string{
				"web-1    pool-acme  leaving  v1       warned          3        42  announced",
				"web-3    default    out      -        -               0         ?",
				"pool-acme 0 serving + 1 leaving",
			},
		},
	}
	var lineCounts []int
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows := rowsFrom(p, tc.state, tc.stats, map[string]string{"web-1": "announced 'web leaving v1'; waiting 1s"})
			v := viewData{Elapsed: 1500 * time.Millisecond, Rows: rows, Pools: p.Pools, Threshold: 1}
			if tc.state != nil {
				v.Counts = countPools(*tc.state, "web", p.Pools)
			}
			lines := renderView(v)
			lineCounts = append(lineCounts, len(lines))
			text := strings.Join(lines, "\n")
			for _, want := range tc.wantLines {
				if !strings.Contains(text, want) {
					t.Errorf("view lacks %q:\n%s", want, text)
				}
			}
		})
	}
	if len(lineCounts) == 2 && lineCounts[0] != lineCounts[1] {
		t.Errorf("frames have %v lines; a terminal redraw needs the same count every time", lineCounts)
	}
}

func TestScriptStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line, want string
	}{
		{name: "script log line", line: "2025-01-02T03:04:05.678Z pollbal-update.sh[42]: emptied pool file (out of rotation); draining 1s", want: "emptied pool file (out of rotation); draining 1s"},
		{name: "anything else", line: "bash: oops", want: "bash: oops"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := scriptStep(tc.line); got != tc.want {
				t.Errorf("scriptStep = %q, want %q", got, tc.want)
			}
		})
	}
}
