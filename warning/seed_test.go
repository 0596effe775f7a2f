package warning

import (
	"slices"
	"testing"

	"pollbal/protocol"
)

// After a restore, the first round records events only for what changed since the previous
// process: a backend it already warned is not "started" again, one it no longer warns is
// "stopped", and an id the configuration does not list is left out of the seed.
func TestTrackerSeed(t *testing.T) {
	f := newTrackerFixture(t, trackerConfig("a", "b", "c"))
	f.tr.Seed([]string{"a", "c", "gone"})
	if !f.tr.Warned("a") || f.tr.Warned("gone") {
		t.Fatalf("seeded warned: a=%v gone=%v, want a only among those", f.tr.Warned("a"), f.tr.Warned("gone"))
	}
	// a and b serving, threshold 2: both are warned; c, which was warned, is not ready now.
	f.members.set(web("a", closedAddr(t), protocol.Serving), web("b", closedAddr(t), protocol.Serving))
	f.round()
	want := []string{"warning_started: warning b: needed to keep the threshold", "warning_stopped: no longer warning c"}
	if got := f.events.take(); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
