package store

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
)

// File keeps the moves in the state file, or in memory when it has no path. A move is written
// to the file before it is applied to the target, and when the write fails nothing changes, so
// a move either survives a restart or does not happen. With etcd, a File is the cache of the
// moves read from it. File is safe for concurrent use.
type File struct {
	target Target
	log    *slog.Logger

	// mu serialises moves, cache writes and path changes, so that the file and the target's
	// overrides always agree.
	mu   sync.Mutex
	path string
}

func newFile(path string, target Target, log *slog.Logger) *File {
	return &File{target: target, log: log, path: path}
}

// Status is the file, or memory when there is no path. Both are always up.
func (f *File) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == "" {
		return Status{Kind: KindMemory, Up: true}
	}
	return Status{Kind: KindFile, Up: true}
}

// Set moves backend id to pool: it persists the new set of moves, then applies the move.
func (f *File) Set(_ context.Context, id, pool string) (int64, error) {
	if err := checkPool(pool); err != nil {
		return 0, err
	}
	if !f.target.Known(id) {
		return 0, unknownBackend(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.target.Overrides()
	next := maps.Clone(old)
	next[id] = pool
	if err := f.persist(old, next); err != nil {
		return 0, err
	}
	if err := f.target.SetOverride(id, pool); err != nil {
		f.restore(old)
		return 0, f.refused(id, err)
	}
	return 0, nil
}

// Clear drops backend id's move after persisting the set without it. A move kept for a backend
// that a reload removed can be dropped too; clearing a backend that has no move changes nothing.
func (f *File) Clear(_ context.Context, id string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.target.Overrides()
	if _, ok := old[id]; !ok {
		if !f.target.Known(id) {
			return 0, unknownBackend(id)
		}
		return 0, nil // nothing to drop
	}
	next := maps.Clone(old)
	delete(next, id)
	if err := f.persist(old, next); err != nil {
		return 0, err
	}
	if err := f.target.ClearOverride(id); err != nil {
		f.restore(old)
		return 0, f.refused(id, err)
	}
	return 0, nil
}

// refused is the error of a move the target refused after it was persisted (and restored): a
// reload removed the backend in between.
func (f *File) refused(id string, err error) error {
	if !f.target.Known(id) {
		return unknownBackend(id)
	}
	return fmt.Errorf("apply move: %w", err)
}

// persist writes next to the state file, if there is one. When the file was replaced but the
// write still failed (the directory fsync), the old set is written back so that file and target
// keep agreeing. Callers hold mu.
func (f *File) persist(old, next Moves) error {
	if f.path == "" {
		return nil
	}
	replaced, err := saveState(f.path, next)
	if err != nil && replaced {
		f.restore(old)
	}
	return err
}

// restore writes old back to the state file after a failed move. Callers hold mu.
func (f *File) restore(old Moves) {
	if f.path == "" {
		return
	}
	if _, err := saveState(f.path, old); err != nil {
		f.log.Error("cannot restore the admin state file; it may not match the running overrides",
			"state_file", f.path, "err", err)
	}
}

// replace applies a whole set of moves read from a shared store and keeps it in the state file,
// the cache used until the store answers at the next start.
func (f *File) replace(moves Moves) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target.ReplaceOverrides(moves)
	if f.path == "" {
		return
	}
	if _, err := saveState(f.path, moves); err != nil {
		f.log.Error("cannot write the cache of shared moves to the state file", "state_file", f.path, "err", err)
	}
}

// SetStateFile makes path (a reloaded admin.state_file) the state file. A new path must take the
// running moves, which stay authoritative across reloads: they are written to it first, and
// when that fails nothing changes.
func (f *File) SetStateFile(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if path != "" && path != f.path {
		moves := f.target.Overrides()
		if _, err := saveState(path, moves); err != nil {
			return fmt.Errorf("admin.state_file: %w", err)
		}
		f.log.Info("admin state file changed; running overrides written to it", "state_file", path, "overrides", len(moves))
	}
	f.path = path
	return nil
}

// Run does nothing: a file needs no follower. It returns at once.
func (f *File) Run(context.Context) error { return nil }

// Close does nothing: every write is complete when its call returns.
func (f *File) Close() error { return nil }
