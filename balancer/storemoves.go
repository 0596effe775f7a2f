package balancer

import (
	"fmt"
	"maps"
	"slices"
)

// AlarmStoreUnavailable is the alarm raised when the shared store of moves cannot be reached.
const AlarmStoreUnavailable = "store_unavailable"

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

// StoreUnavailable raises the store_unavailable alarm: logged, shown in the events and posted
// to the webhook, at most once per dedup window.
func (b *Balancer) StoreUnavailable(why string) {
	b.alarms.storeUnavailable(b.Snapshot().cfg.Site, why)
}

// StoreAlarm is the JSON body POSTed to alarms.webhook when the store cannot be reached.
type StoreAlarm struct {
	Alarm  string `json:"alarm"` // store_unavailable
	Site   string `json:"site"`
	Reason string `json:"reason"`
	Time   string `json:"time"`
}

func (a *alarms) storeUnavailable(site, why string) {
	webhook, due := a.dueAlarm([3]string{AlarmStoreUnavailable})
	if !due {
		return
	}
	a.log.Warn(AlarmStoreUnavailable, "err", why)
	a.events.Add(AlarmStoreUnavailable, "the shared store of moves cannot be reached: "+why)
	a.send(webhook, StoreAlarm{Alarm: AlarmStoreUnavailable, Site: site, Reason: why, Time: a.now().UTC().Format("2006-01-02T15:04:05Z07:00")},
		"alarm", AlarmStoreUnavailable)
}
