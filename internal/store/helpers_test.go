package store

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"

	"pollbal/balancer"
	"pollbal/internal/alarms"
	"pollbal/internal/testproc"
)

// The balancer is the target the store is wired to, and the alarms' Notifier its Alarms.
var (
	_ Target = (*balancer.Balancer)(nil)
	_ Alarms = (*alarms.Notifier)(nil)
)

// fakeTarget stands in for the balancer's override API: it holds the moves of a fixed set of
// configured backends. It is also the store's Alarms and Events, and records the alarms raised
// and the events written. It is safe for concurrent use.
type fakeTarget struct {
	mu    sync.Mutex
	known map[string]bool
	moves map[string]string
	// removeOnApply makes the next SetOverride or ClearOverride find its backend removed (a
	// reload between the store's check and its call).
	removeOnApply bool
	// ups is true for each "store" event (etcd reachable), false for each alarm raised.
	ups []bool
}

func newTarget(ids ...string) *fakeTarget {
	t := &fakeTarget{known: map[string]bool{}, moves: map[string]string{}}
	for _, id := range ids {
		t.known[id] = true
	}
	return t
}

func (t *fakeTarget) Known(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.known[id]
}

func (t *fakeTarget) Overrides() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.moves)
}

func (t *fakeTarget) removed(id string) bool {
	if t.removeOnApply {
		t.removeOnApply = false
		delete(t.known, id)
	}
	return !t.known[id]
}

func (t *fakeTarget) SetOverride(id, pool string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed(id) {
		return fmt.Errorf("%w %q", balancer.ErrUnknownBackend, id)
	}
	t.moves[id] = pool
	return nil
}

func (t *fakeTarget) ClearOverride(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.moves[id]; !ok && t.removed(id) {
		return fmt.Errorf("%w %q", balancer.ErrUnknownBackend, id)
	}
	delete(t.moves, id)
	return nil
}

func (t *fakeTarget) ReplaceOverrides(moves map[string]string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := !maps.Equal(t.moves, moves)
	t.moves = maps.Clone(moves)
	return changed
}

// StoreUnavailable is the Alarms port: each alarm says etcd cannot be reached.
func (t *fakeTarget) StoreUnavailable(string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ups = append(t.ups, false)
}

// Add is the Events port: each "store" event says etcd is reachable again.
func (t *fakeTarget) Add(kind, _ string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kind == "store" {
		t.ups = append(t.ups, true)
	}
}

// state returns the moves held and the reachability reported.
func (t *fakeTarget) state() (map[string]string, []bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.moves), slices.Clone(t.ups)
}

// jsonLog is a JSON logger and what it wrote; it is safe for concurrent use.
type jsonLog struct{ testproc.Buffer }

func (l *jsonLog) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readState reads the state file's moves as the next start would.
func readState(t *testing.T, path string) Moves {
	t.Helper()
	got, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
