package store

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadState(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A sparse file: over the limit without writing it.
	big := file("big.json", "")
	if err := os.Truncate(big, maxStateFileSize+1); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		want    map[string]string
		wantErr string
	}{
		{name: "no state file configured", path: "", want: map[string]string{}},
		{name: "missing file: nothing was ever moved", path: filepath.Join(dir, "missing.json"), want: map[string]string{}},
		{name: "valid", path: file("ok.json", `{"version":1,"overrides":{"web-1":"unassigned","web-2":"pool-acme"}}`),
			want: map[string]string{"web-1": "unassigned", "web-2": "pool-acme"}},
		{name: "no overrides", path: file("none.json", `{"version":1,"overrides":{}}`), want: map[string]string{}},
		{name: "null overrides", path: file("null.json", `{"version":1,"overrides":null}`), want: map[string]string{}},
		{name: "truncated JSON", path: file("trunc.json", `{"version":1,"overrides":{"web-1":`), wantErr: "corrupt"},
		{name: "empty file", path: file("empty.json", ""), wantErr: "empty file"},
		{name: "not JSON", path: file("text.json", "web-1 unassigned\n"), wantErr: "corrupt"},
		{name: "wrong version", path: file("v2.json", `{"version":2,"overrides":{}}`), wantErr: "unsupported version 2"},
		{name: "missing version", path: file("v0.json", `{"overrides":{}}`), wantErr: "unsupported version 0"},
		{name: "unknown field", path: file("extra.json", `{"version":1,"overrides":{},"extra":1}`), wantErr: "unknown field"},
		{name: "invalid pool name", path: file("badpool.json", `{"version":1,"overrides":{"web-1":"Bad Pool"}}`), wantErr: "invalid pool name"},
		{name: "invalid backend id", path: file("badid.json", `{"version":1,"overrides":{"":"unassigned"}}`), wantErr: "invalid backend id"},
		{name: "pool is not a string", path: file("num.json", `{"version":1,"overrides":{"web-1":3}}`), wantErr: "corrupt"},
		{name: "trailing data", path: file("trail.json", `{"version":1,"overrides":{}} {}`), wantErr: "trailing data"},
		{name: "unreadable: a directory", path: dir, wantErr: "read state file"},
		{name: "a named pipe is refused, not waited on", path: fifo, wantErr: "read state file: " + fifo + ": not a regular file (a named pipe)"},
		{name: "over 16 MiB", path: big, wantErr: "read state file: " + big + ": larger than 16 MiB (16777217 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadState(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadState error %v, want one containing %q (got %v)", err, tt.wantErr, got)
				}
				if got != nil {
					t.Errorf("ReadState returned %v with an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !maps.Equal(got, tt.want) {
				t.Errorf("ReadState = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSaveStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	tests := []struct {
		name      string
		overrides map[string]string
	}{
		{name: "first write", overrides: map[string]string{"web-1": "unassigned"}},
		{name: "replace", overrides: map[string]string{"web-1": "canary", "web-2": "default"}},
		{name: "nil map", overrides: nil},
		{name: "empty again", overrides: map[string]string{}},
		// Regression: a backend without an id is known by its address (the default id); its
		// move was saved but the file then failed to load, so pollbal could not restart.
		{name: "address as id", overrides: map[string]string{"127.0.0.1:9001": "unassigned"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := saveState(path, tt.overrides); err != nil {
				t.Fatal(err)
			}
			got, err := ReadState(path)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.overrides) {
				t.Errorf("round trip gave %v, want %v", got, tt.overrides)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), `"version": 1`) || !strings.Contains(string(data), `"overrides"`) {
				t.Errorf("file %s lacks the documented fields", data)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only the state file (temp files must not be left behind)", len(entries))
			}
		})
	}
}

func TestSaveStateFailures(t *testing.T) {
	dir := t.TempDir()
	busy := filepath.Join(dir, "busy")
	if err := os.Mkdir(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(busy, "x"), "x")
	tests := []struct {
		name string
		path string
	}{
		{name: "empty path", path: ""},
		{name: "directory missing", path: filepath.Join(dir, "missing", "state.json")},
		{name: "path is a non-empty directory", path: busy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := saveState(tt.path, map[string]string{"web-1": "unassigned"}); err == nil {
				t.Fatal("saveState succeeded, want an error")
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temp file %s left behind", e.Name())
				}
			}
		})
	}
}
