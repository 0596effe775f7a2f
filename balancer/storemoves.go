package balancer

import (
	"fmt"
	"maps"
	"slices"
)

// ReplaceOverrides sets the whole set of admin overrides at once (the moves read from a shared
// store, which validated them: store.Validate). A move for a backend id that is not configured
// here is kept and applies when the backend appears. It reports whether the set changed.
func (b *Balancer) ReplaceOverrides(moves map[string]string) bool {
	next := maps.Clone(moves)
	if next == nil {
		next = map[string]string{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if maps.Equal(b.overrides, next) {
		return false
	}
	old := b.overrides
	b.overrides = next
	b.rebuildLocked()
	for _, id := range slices.Sorted(maps.Keys(next)) {
		if old[id] != next[id] {
			b.events.Add("admin_move", fmt.Sprintf("backend %s moved to pool %s (shared store)", id, next[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(old)) {
		if _, ok := next[id]; !ok {
			b.events.Add("admin_move", fmt.Sprintf("backend %s returned to its configured pool (shared store)", id))
		}
	}
	return true
}
