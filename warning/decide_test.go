package warning

import (
	"reflect"
	"testing"

	"pollbal/configs"
	"pollbal/protocol"
)

func serving(backend, pool, service, version string) Member {
	return Member{Backend: backend, Pool: pool, Report: protocol.Report{Service: service, Status: protocol.Serving, Version: version}}
}

func leaving(backend, pool, service, version string) Member {
	return Member{Backend: backend, Pool: pool, Report: protocol.Report{Service: service, Status: protocol.Leaving, Version: version}}
}

func TestDecide(t *testing.T) {
	byVersion := func(threshold int) map[string]Policy {
		return map[string]Policy{"web": {Threshold: threshold, Scope: configs.ScopeVersion}}
	}
	tests := []struct {
		name     string
		members  []Member
		policies map[string]Policy
		want     []Group
	}{
		{
			name:     "T=1 with a single backend of a version warns it",
			members:  []Member{serving("a", "p", "web", "v1")},
			policies: byVersion(1),
			want:     []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"a"}, Warned: []string{"a"}}},
		},
		{
			name:     "more serving than T warns nobody",
			members:  []Member{serving("a", "p", "web", "v1"), serving("b", "p", "web", "v1"), serving("c", "p", "web", "v1")},
			policies: byVersion(2),
			want:     []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 2, Serving: []string{"a", "b", "c"}}},
		},
		{
			name: "one leaving with T still met: serving at T warned, leaving not",
			members: []Member{
				serving("c", "p", "web", "v1"), leaving("a", "p", "web", "v1"), serving("b", "p", "web", "v1"),
			},
			policies: byVersion(2),
			want: []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 2,
				Serving: []string{"b", "c"}, Leaving: []string{"a"}, Warned: []string{"b", "c"}}},
		},
		{
			name: "one leaving with more than T serving warns nobody",
			members: []Member{
				serving("b", "p", "web", "v1"), serving("c", "p", "web", "v1"), serving("d", "p", "web", "v1"), leaving("a", "p", "web", "v1"),
			},
			policies: byVersion(2),
			want: []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 2,
				Serving: []string{"b", "c", "d"}, Leaving: []string{"a"}}},
		},
		{
			name: "several leaving at once below T: leaving warned too",
			members: []Member{
				leaving("a", "p", "web", "v1"), leaving("b", "p", "web", "v1"), serving("c", "p", "web", "v1"), leaving("d", "p", "web", "v1"),
			},
			policies: byVersion(2),
			want: []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 2,
				Serving: []string{"c"}, Leaving: []string{"a", "b", "d"}, Warned: []string{"a", "b", "c", "d"}}},
		},
		{
			name:     "all leaving: every leaving backend warned",
			members:  []Member{leaving("b", "p", "web", ""), leaving("a", "p", "web", "")},
			policies: byVersion(1),
			want: []Group{{Pool: "p", Service: "web", Version: "", Threshold: 1,
				Leaving: []string{"a", "b"}, Warned: []string{"a", "b"}}},
		},
		{
			name: "per-version grouping: a new version with one backend is its own group",
			members: []Member{
				serving("a", "p", "web", "v1"), serving("b", "p", "web", "v1"), serving("c", "p", "web", "v1"), serving("n", "p", "web", "v2"),
			},
			policies: byVersion(2),
			want: []Group{
				{Pool: "p", Service: "web", Version: "v1", Threshold: 2, Serving: []string{"a", "b", "c"}},
				{Pool: "p", Service: "web", Version: "v2", Threshold: 2, Serving: []string{"n"}, Warned: []string{"n"}},
			},
		},
		{
			name: "unversioned is its own group beside versioned ones",
			members: []Member{
				serving("a", "p", "web", ""), serving("b", "p", "web", "v1"), serving("c", "p", "web", "v1"),
			},
			policies: byVersion(1),
			want: []Group{
				{Pool: "p", Service: "web", Version: "", Threshold: 1, Serving: []string{"a"}, Warned: []string{"a"}},
				{Pool: "p", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"b", "c"}},
			},
		},
		{
			name: "scope service counts all versions together",
			members: []Member{
				serving("a", "p", "web", "v1"), serving("b", "p", "web", "v2"), leaving("c", "p", "web", "v1"),
			},
			policies: map[string]Policy{"web": {Threshold: 2, Scope: configs.ScopeService}},
			want: []Group{{Pool: "p", Service: "web", Version: "", Threshold: 2,
				Serving: []string{"a", "b"}, Leaving: []string{"c"}, Warned: []string{"a", "b"}}},
		},
		{
			name:     "empty scope means version",
			members:  []Member{serving("a", "p", "web", "v1"), serving("b", "p", "web", "v2")},
			policies: map[string]Policy{"web": {Threshold: 1}},
			want: []Group{
				{Pool: "p", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"a"}, Warned: []string{"a"}},
				{Pool: "p", Service: "web", Version: "v2", Threshold: 1, Serving: []string{"b"}, Warned: []string{"b"}},
			},
		},
		{
			name:     "pool with zero ready members yields no groups",
			members:  nil,
			policies: byVersion(2),
			want:     nil,
		},
		{
			name: "unassigned pool ignored",
			members: []Member{
				serving("u", configs.PoolUnassigned, "web", "v1"), serving("a", "p", "web", "v1"), serving("b", "p", "web", "v1"),
			},
			policies: byVersion(2),
			want:     []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 2, Serving: []string{"a", "b"}, Warned: []string{"a", "b"}}},
		},
		{
			name:     "threshold 0 warns nobody but the group still appears",
			members:  []Member{serving("a", "p", "web", "v1"), leaving("b", "p", "web", "v1")},
			policies: byVersion(0),
			want:     []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 0, Serving: []string{"a"}, Leaving: []string{"b"}}},
		},
		{
			name:     "service without a policy skipped",
			members:  []Member{serving("a", "p", "api", "v1"), serving("b", "p", "web", "v1")},
			policies: byVersion(1),
			want:     []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"b"}, Warned: []string{"b"}}},
		},
		{
			name: "pools are separate groups, sorted by pool, service, version",
			members: []Member{
				serving("z1", "pool-z", "web", "v1"),
				serving("a2", "pool-a", "web", "v2"),
				serving("a1", "pool-a", "web", "v1"),
				serving("a3", "pool-a", "api", "v9"),
				serving("d1", configs.PoolDefault, "web", "v1"),
			},
			policies: map[string]Policy{"web": {Threshold: 1}, "api": {Threshold: 3}},
			want: []Group{
				{Pool: "default", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"d1"}, Warned: []string{"d1"}},
				{Pool: "pool-a", Service: "api", Version: "v9", Threshold: 3, Serving: []string{"a3"}, Warned: []string{"a3"}},
				{Pool: "pool-a", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"a1"}, Warned: []string{"a1"}},
				{Pool: "pool-a", Service: "web", Version: "v2", Threshold: 1, Serving: []string{"a2"}, Warned: []string{"a2"}},
				{Pool: "pool-z", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"z1"}, Warned: []string{"z1"}},
			},
		},
		{
			name:     "duplicate member counted once",
			members:  []Member{serving("a", "p", "web", "v1"), serving("a", "p", "web", "v1"), serving("b", "p", "web", "v1")},
			policies: byVersion(2),
			want:     []Group{{Pool: "p", Service: "web", Version: "v1", Threshold: 2, Serving: []string{"a", "b"}, Warned: []string{"a", "b"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]Member(nil), tc.members...)
			got := Decide(tc.members, tc.policies)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decide() =\n%+v\nwant\n%+v", got, tc.want)
			}
			if !reflect.DeepEqual(in, tc.members) {
				t.Fatalf("Decide modified its input")
			}
		})
	}
}

func TestDecideWarnedIsNotAliased(t *testing.T) {
	groups := Decide([]Member{serving("a", "p", "web", "v1"), serving("b", "p", "web", "v1")},
		map[string]Policy{"web": {Threshold: 2}})
	if len(groups) != 1 || len(groups[0].Warned) != 2 {
		t.Fatalf("groups = %+v, want one group with two warned", groups)
	}
	groups[0].Warned[0] = "changed"
	if groups[0].Serving[0] != "a" {
		t.Fatalf("Warned shares its backing array with Serving")
	}
}

func TestWarningFor(t *testing.T) {
	tests := []struct {
		name  string
		group Group
		site  string
		want  string
	}{
		{
			name:  "versioned",
			group: Group{Pool: "p", Service: "web", Version: "v3", Threshold: 2, Serving: []string{"a", "b"}, Leaving: []string{"c"}},
			site:  "eu-west-1",
			want:  "web v3 serving=2 leaving=1 threshold=2 site=eu-west-1",
		},
		{
			name:  "unversioned shows dash",
			group: Group{Pool: "p", Service: "api", Threshold: 1, Serving: []string{"a"}},
			site:  "s",
			want:  "api - serving=1 leaving=0 threshold=1 site=s",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := warningFor(tc.group, tc.site).Line(); got != tc.want {
				t.Fatalf("warningFor().Line() = %q, want %q", got, tc.want)
			}
		})
	}
}
