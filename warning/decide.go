package warning

import (
	"cmp"
	"slices"

	"pollbal/configs"
	"pollbal/protocol"
)

// Member is one ready backend's report of one service, placed in its node pool.
// Only ready backends are passed to Decide; a backend that reports several services appears
// once per service.
type Member struct {
	Backend string // backend id
	Pool    string // the backend's node pool (authoritative, from config or admin)
	protocol.Report
}

// Policy is one service's warning configuration.
type Policy struct {
	Threshold int    // 0 = no warnings
	Scope     string // configs.ScopeVersion (also when "") or configs.ScopeService
}

// Group is one (pool, service, version) group — or (pool, service) for scope service — with
// the decision for it. Slices are sorted by backend id and never shared between groups.
type Group struct {
	Pool, Service, Version string // Version "" for unversioned and for scope service
	Threshold              int
	Serving, Leaving       []string // backend ids, sorted
	Warned                 []string // sorted
}

type groupKey struct{ pool, service, version string }

// Decide groups the ready members and decides, per group with threshold T > 0 and serving set
// Sv, who is warned: every serving backend when |Sv| <= T, and also every leaving one when
// |Sv| < T; nobody otherwise. Members of the unassigned pool and of services without a policy
// are skipped. Every group appears in the result (with Warned nil when nobody is warned),
// sorted by pool, service, version. Decide does not modify its arguments.
func Decide(members []Member, policies map[string]Policy) []Group {
	idx := make(map[groupKey]int)
	var groups []Group
	for _, m := range members {
		if m.Pool == configs.PoolUnassigned {
			continue
		}
		p, ok := policies[m.Service]
		if !ok {
			continue
		}
		k := groupKey{pool: m.Pool, service: m.Service, version: m.Version}
		if p.Scope == configs.ScopeService {
			k.version = ""
		}
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, Group{Pool: k.pool, Service: k.service, Version: k.version, Threshold: p.Threshold})
		}
		g := &groups[i]
		if m.Status == protocol.Leaving {
			g.Leaving = append(g.Leaving, m.Backend)
		} else {
			g.Serving = append(g.Serving, m.Backend)
		}
	}
	for i := range groups {
		g := &groups[i]
		g.Serving = sortedUnique(g.Serving)
		g.Leaving = sortedUnique(g.Leaving)
		g.Warned = warned(g.Threshold, g.Serving, g.Leaving)
	}
	slices.SortFunc(groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Service, b.Service), cmp.Compare(a.Version, b.Version))
	})
	return groups
}

// warned decides one group: with a threshold of 0, or more serving than it, nobody is warned;
// with exactly the threshold, the serving ones; with fewer, the leaving ones too. Serving and
// leaving are sorted.
func warned(threshold int, serving, leaving []string) []string {
	if threshold <= 0 || len(serving) > threshold {
		return nil
	}
	w := slices.Clone(serving)
	if len(serving) < threshold {
		w = append(w, leaving...)
		w = sortedUnique(w)
	}
	if len(w) == 0 {
		return nil
	}
	return w
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
