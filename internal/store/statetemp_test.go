package store

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Regression: kill -9 during admin moves, 60 times, left 18 .tmp files beside the state file
// forever. Start removes them, and only them.
func TestRemoveStaleTemps(t *testing.T) {
	tests := []struct {
		name        string
		files       []string // created in the directory before the call
		dirs        []string
		wantRemoved []string
		wantKept    []string
	}{
		{name: "no state file yet, nothing else", wantRemoved: nil},
		{name: "temp files of interrupted writes",
			files:       []string{"state.json", ".state.json.tmp-123", ".state.json.tmp-4567"},
			wantRemoved: []string{".state.json.tmp-123", ".state.json.tmp-4567"}, wantKept: []string{"state.json"}},
		{name: "other files and another state file's temps are kept",
			files:       []string{"state.json", "state.json.tmp-1", ".other.json.tmp-1", ".state.json.bak", "notes"},
			wantRemoved: nil, wantKept: []string{"state.json", "state.json.tmp-1", ".other.json.tmp-1", ".state.json.bak", "notes"}},
		{name: "a directory with the temp prefix is left alone",
			dirs: []string{".state.json.tmp-9"}, wantRemoved: nil, wantKept: []string{".state.json.tmp-9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				writeFile(t, filepath.Join(dir, f), "x")
			}
			for _, d := range tt.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := removeStaleTemps(filepath.Join(dir, "state.json"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range removed {
				got = append(got, filepath.Base(r))
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantRemoved) {
				t.Errorf("removed %v, want %v", got, tt.wantRemoved)
			}
			for _, name := range tt.wantRemoved {
				if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Errorf("%s still there (%v)", name, err)
				}
			}
			for _, name := range tt.wantKept {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Errorf("%s was removed: %v", name, err)
				}
			}
		})
	}
}

// The temp files removeStaleTemps removes are the ones saveState creates: an interrupted write
// is simulated by a temp file made the way saveState makes it.
func TestRemoveStaleTempsMatchesSaveState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if _, err := saveState(path, map[string]string{"web-1": "unassigned"}); err != nil {
		t.Fatal(err)
	}
	d, prefix := tempPrefix(path)
	tmp, err := os.CreateTemp(d, prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	removed, err := removeStaleTemps(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != tmp.Name() {
		t.Fatalf("removed %v, want [%s]", removed, tmp.Name())
	}
	if got, err := ReadState(path); err != nil || got["web-1"] != "unassigned" {
		t.Fatalf("state file after the cleanup: %v %v", got, err)
	}
}

func TestRemoveStaleTempsNoPath(t *testing.T) {
	for _, p := range []string{"", filepath.Join(t.TempDir(), "missing-dir", "state.json")} {
		if removed, err := removeStaleTemps(p); err != nil || removed != nil {
			t.Errorf("removeStaleTemps(%q) = %v, %v; want nothing removed, no error", p, removed, err)
		}
	}
}
