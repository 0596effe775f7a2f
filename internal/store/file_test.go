package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// newFileStore is New without etcd, over target, logging to log.
func newFileStore(t *testing.T, path string, target *fakeTarget, log *jsonLog) *File {
	t.Helper()
	reg := prometheus.NewRegistry()
	st, err := New(Options{StateFile: path, Target: target, Logger: log.logger(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := testutil.GatherAndCount(reg, "pollbal_store_up"); err != nil || v != 1 {
		t.Fatalf("pollbal_store_up registered %d times (%v), want once", v, err)
	}
	return st.(*File)
}

func TestFileSetAndClear(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	target := newTarget("web-1", "web-2", "web-3")
	f := newFileStore(t, path, target, &jsonLog{})
	ctx := context.Background()
	steps := []struct {
		name    string
		clear   bool
		id      string
		pool    string
		wantErr error
		want    map[string]string // the target's moves and the file's afterwards
	}{
		{name: "move web-1 out of scheduling", id: "web-1", pool: "unassigned", want: map[string]string{"web-1": "unassigned"}},
		{name: "move web-3 to the canary pool", id: "web-3", pool: "canary", want: map[string]string{"web-1": "unassigned", "web-3": "canary"}},
		{name: "move web-1 again", id: "web-1", pool: "pool-beta", want: map[string]string{"web-1": "pool-beta", "web-3": "canary"}},
		{name: "invalid pool name", id: "web-2", pool: "Not A Pool", wantErr: ErrInvalidPool, want: map[string]string{"web-1": "pool-beta", "web-3": "canary"}},
		{name: "empty pool name", id: "web-2", pool: "", wantErr: ErrInvalidPool, want: map[string]string{"web-1": "pool-beta", "web-3": "canary"}},
		{name: "unknown backend", id: "web-9", pool: "canary", wantErr: ErrUnknownBackend, want: map[string]string{"web-1": "pool-beta", "web-3": "canary"}},
		{name: "clear web-1", clear: true, id: "web-1", want: map[string]string{"web-3": "canary"}},
		{name: "clear web-2, which has no move", clear: true, id: "web-2", want: map[string]string{"web-3": "canary"}},
		{name: "clear an unknown backend", clear: true, id: "web-9", wantErr: ErrUnknownBackend, want: map[string]string{"web-3": "canary"}},
		{name: "clear web-3", clear: true, id: "web-3", want: map[string]string{}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var rev int64
			var err error
			if st.clear {
				rev, err = f.Clear(ctx, st.id)
			} else {
				rev, err = f.Set(ctx, st.id, st.pool)
			}
			if !errors.Is(err, st.wantErr) || (st.wantErr == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, st.wantErr)
			}
			if rev != 0 {
				t.Errorf("revision %d, want 0 (a file has none)", rev)
			}
			if got, _ := target.state(); !maps.Equal(got, st.want) {
				t.Errorf("target holds %v, want %v", got, st.want)
			}
			if got := readState(t, path); !maps.Equal(got, st.want) {
				t.Errorf("state file holds %v, want %v", got, st.want)
			}
		})
	}
}

// A state file that cannot be written makes the move fail, and nothing changes. The tests run as
// root in CI, where permission bits do not stop writes; these paths fail for root too.
func TestFileUnwritable(t *testing.T) {
	dirPath := filepath.Join(t.TempDir(), "state-is-a-dir")
	if err := os.Mkdir(dirPath, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dirPath, "keep"), "x") // a non-empty directory cannot be replaced
	fileAsDir := filepath.Join(t.TempDir(), "plain-file")
	writeFile(t, fileAsDir, "x")
	tests := []struct {
		name  string
		path  string
		clear bool
	}{
		{name: "move, directory missing", path: filepath.Join(t.TempDir(), "missing", "state.json")},
		{name: "move, path is a directory", path: dirPath},
		{name: "move, parent is a file", path: filepath.Join(fileAsDir, "state.json")},
		{name: "move, under /proc", path: "/proc/pollbal-state.json"},
		{name: "clear, directory missing", path: filepath.Join(t.TempDir(), "missing", "state.json"), clear: true},
		{name: "clear, path is a directory", path: dirPath, clear: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := newTarget("web-1")
			target.moves = map[string]string{"web-1": "canary"}
			f := newFileStore(t, tt.path, target, &jsonLog{})
			var err error
			if tt.clear {
				_, err = f.Clear(context.Background(), "web-1")
			} else {
				_, err = f.Set(context.Background(), "web-1", "unassigned")
			}
			if err == nil || !strings.Contains(err.Error(), "save state") {
				t.Fatalf("error %v, want one saying the state could not be saved", err)
			}
			if got, _ := target.state(); !maps.Equal(got, map[string]string{"web-1": "canary"}) {
				t.Errorf("target holds %v after a failed write, want it unchanged", got)
			}
		})
	}
}

// A reload can remove the backend between the check and the call that applies the move: the
// move was persisted by then, so the old file is written back and the move fails as for an
// unknown backend.
func TestFileMoveRefusedByTheTarget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	target := newTarget("web-1", "web-2")
	f := newFileStore(t, path, target, &jsonLog{})
	ctx := context.Background()
	if _, err := f.Set(ctx, "web-2", "canary"); err != nil {
		t.Fatal(err)
	}
	target.mu.Lock()
	target.removeOnApply = true
	target.mu.Unlock()
	if _, err := f.Set(ctx, "web-1", "unassigned"); !errors.Is(err, ErrUnknownBackend) || err.Error() != `unknown backend "web-1"` {
		t.Fatalf("error %v, want unknown backend \"web-1\"", err)
	}
	want := map[string]string{"web-2": "canary"}
	if got := readState(t, path); !maps.Equal(got, want) {
		t.Errorf("state file holds %v, want the old set %v written back", got, want)
	}
	if got, _ := target.state(); !maps.Equal(got, want) {
		t.Errorf("target holds %v, want %v", got, want)
	}
}

// Concurrent moves are serialised: without that, two moves read the same set and the later
// write drops the earlier move, and the file and the target disagree.
func TestFileConcurrentMovesAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	ids := []string{"web-1", "web-2", "web-3", "canary-1"}
	target := newTarget(ids...)
	f := newFileStore(t, path, target, &jsonLog{})
	pools := []string{"unassigned", "canary", "", "default"} // "" clears
	var wg sync.WaitGroup
	errs := make(chan error, len(ids)*len(pools))
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range pools {
				var err error
				if p == "" {
					_, err = f.Clear(context.Background(), id)
				} else {
					_, err = f.Set(context.Background(), id, p)
				}
				if err != nil {
					errs <- fmt.Errorf("%s → %q: %w", id, p, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	file := readState(t, path)
	if got, _ := target.state(); !maps.Equal(file, got) {
		t.Errorf("state file %v disagrees with the target %v", file, got)
	}
	for _, id := range ids {
		if file[id] != "default" {
			t.Errorf("%s ends in %q, want default (the last move)", id, file[id])
		}
	}
}

func TestFileStatus(t *testing.T) {
	target := newTarget()
	if got := newFileStore(t, filepath.Join(t.TempDir(), "state.json"), target, &jsonLog{}).Status(); got != (Status{Kind: KindFile, Up: true}) {
		t.Errorf("with a state file: %+v", got)
	}
	if got := newFileStore(t, "", target, &jsonLog{}).Status(); got != (Status{Kind: KindMemory, Up: true}) {
		t.Errorf("without a state file: %+v", got)
	}
}

// A reloaded admin.state_file takes the running moves before it is used; when it cannot be
// written, nothing changes.
func TestSetStateFile(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "state.json")
	moved := filepath.Join(dir, "moved-state.json")
	target := newTarget("web-1", "web-2")
	log := &jsonLog{}
	f := newFileStore(t, first, target, log)
	ctx := context.Background()
	if _, err := f.Set(ctx, "web-1", "unassigned"); err != nil {
		t.Fatal(err)
	}

	err := f.SetStateFile(filepath.Join(dir, "no", "state.json"))
	if err == nil || !strings.HasPrefix(err.Error(), "admin.state_file: ") {
		t.Fatalf("an unwritable new state file: %v, want an admin.state_file error", err)
	}
	if _, err := f.Set(ctx, "web-2", "canary"); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, first); !maps.Equal(got, Moves{"web-1": "unassigned", "web-2": "canary"}) {
		t.Fatalf("after a refused change the moves went to %v, want the first state file", got)
	}

	if err := f.SetStateFile(moved); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, moved); !maps.Equal(got, Moves{"web-1": "unassigned", "web-2": "canary"}) {
		t.Errorf("the new state file holds %v, want the running moves", got)
	}
	if lines := log.Records(t, "admin state file changed; running overrides written to it"); len(lines) != 1 ||
		lines[0]["state_file"] != moved || lines[0]["overrides"] != float64(2) {
		t.Errorf("log lines %v, want one naming the new file and 2 moves", lines)
	}
	if _, err := f.Clear(ctx, "web-2"); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, moved); !maps.Equal(got, Moves{"web-1": "unassigned"}) {
		t.Errorf("the new state file holds %v after a clear", got)
	}
	if got := readState(t, first); len(got) != 2 {
		t.Errorf("the old state file changed after the switch: %v", got)
	}

	if err := f.SetStateFile(""); err != nil {
		t.Fatal(err)
	}
	if got := f.Status(); got.Kind != KindMemory {
		t.Errorf("without a state file: %+v", got)
	}
}

// Load removes what interrupted writes left behind and logs it, then reads the moves; a corrupt
// file is an error that names its key.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	writeFile(t, path, `{"version":1,"overrides":{"web-1":"unassigned"}}`)
	writeFile(t, filepath.Join(dir, ".state.json.tmp-1"), `{"version":1,"over`)
	log := &jsonLog{}
	got, err := Load(path, log.logger())
	if err != nil || !maps.Equal(got, Moves{"web-1": "unassigned"}) {
		t.Fatalf("Load = %v, %v", got, err)
	}
	if lines := log.Records(t, "removed temporary files that interrupted state-file writes left behind"); len(lines) != 1 {
		t.Errorf("log lines %v, want one", lines)
	}
	if _, err := os.Stat(filepath.Join(dir, ".state.json.tmp-1")); !os.IsNotExist(err) {
		t.Errorf("the temporary file is still there: %v", err)
	}
	writeFile(t, path, "{")
	if _, err := Load(path, log.logger()); err == nil || !strings.HasPrefix(err.Error(), "admin.state_file: state file "+path+" is corrupt") {
		t.Errorf("Load of a corrupt file: %v", err)
	}
}
