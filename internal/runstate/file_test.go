package runstate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pollbal/protocol"
)

func sample() File {
	at := time.Date(2026, 12, 3, 10, 0, 0, 123e6, time.UTC)
	return File{
		Version: Version, Site: "eu", Written: at, PID: 42, Pollbal: "dev",
		Backends: []Backend{
			{
				Address: "127.0.0.1:9001", ID: "web-1", Ready: true,
				Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v3"}, {Service: "api", Status: protocol.Leaving}},
				Ignored: []string{"db"}, Checked: at, ReadySince: at.Add(-time.Second),
				Load:   &Load{InFlight: 12, Capacity: 64, At: at, MineThen: 3, LimitThen: 60, PrevOthers: 8, PrevAt: at.Add(-time.Second)},
				Warned: true,
			},
			{Address: "127.0.0.1:9002", ID: "web-2", Ready: true, Reports: []protocol.Report{}, Checked: at},
			{Address: "127.0.0.1:9003", ID: "web-3", Reason: "connection refused", Checked: at, Ejected: true, FailStreak: 4},
		},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	want := sample()
	data, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("round trip:\n got  %+v\n want %+v", *got, want)
	}
	// null reports (not ready) and [] (ready, in no service) stay apart.
	if got.Backends[2].Reports != nil || got.Backends[1].Reports == nil {
		t.Errorf("reports of a not-ready and an out-of-rotation backend: %v, %v", got.Backends[2].Reports, got.Backends[1].Reports)
	}
}

func TestDecode(t *testing.T) {
	good, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	replace := func(from, to string) []byte {
		if !strings.Contains(string(good), from) {
			t.Fatalf("no %q in %s", from, good)
		}
		return []byte(strings.Replace(string(good), from, to, 1))
	}
	tests := []struct {
		name        string
		data        []byte
		wantErr     string // "" = decodes
		wantVersion int
	}{
		{name: "good", data: good, wantVersion: Version},
		{name: "cut short", data: good[:len(good)/2], wantErr: "decode runtime state"},
		{name: "not JSON", data: []byte("web serving v3\n"), wantErr: "decode runtime state"},
		{name: "another version: head only, for Decide to refuse", data: replace(`"version":1`, `"version":7`), wantVersion: 7},
		{name: "another version need not match this format", data: []byte(`{"version":2,"site":"eu","written":"2026-12-03T10:00:00Z","backends":{"new":"shape"}}`), wantVersion: 2},
		{name: "unknown field in this version", data: replace(`"pid":42`, `"pid":42,"extra":1`), wantErr: "unknown field"},
		{name: "bad service name", data: replace(`"service":"web"`, `"service":"-web"`), wantErr: "backends[0]: reports"},
		{name: "bad status", data: replace(`"status":"leaving"`, `"status":"gone"`), wantErr: "backends[0]: reports"},
		{name: "status alias not canonical", data: replace(`"status":"leaving"`, `"status":"ok"`), wantErr: "canonical"},
		{name: "no address", data: replace(`"address":"127.0.0.1:9002"`, `"address":""`), wantErr: "backends[1]: no address"},
		{name: "negative load", data: replace(`"in_flight":12`, `"in_flight":-1`), wantErr: "negative"},
		{name: "negative fail streak", data: replace(`"fail_streak":4`, `"fail_streak":-4`), wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(tt.data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Version != tt.wantVersion || f.Site != "eu" {
				t.Errorf("version %d site %q, want %d eu", f.Version, f.Site, tt.wantVersion)
			}
		})
	}
}

func TestWriteAndRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "runtime.json")
	if _, err := Read(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of a missing file = %v, want fs.ErrNotExist", err)
	}
	if err := Prepare(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o750 {
		t.Fatalf("Prepare made %v (%v), want a directory with mode 0750", st.Mode(), err)
	}
	want := sample()
	data, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second write replaces the first
		if err := write(path, data); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v (%v), want 0600: it names the backends and their load", fi.Mode(), err)
	}
	got, err := Read(path)
	if err != nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d files, want the state file alone", len(entries))
	}
}

// Regression guard: a temporary file that an interrupted write (kill -9 between create and
// rename) left is removed at start, and nothing else is.
func TestPrepareRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runtime.json")
	stale := filepath.Join(dir, ".runtime.json.tmp-12345")
	other := filepath.Join(dir, "state.json")
	for _, f := range []string{stale, other, path} {
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Prepare(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temporary file still there: %v", err)
	}
	for _, f := range []string{other, path} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s removed: %v", f, err)
		}
	}
}

func TestPrepareRefusesAFileForADirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(filepath.Join(dir, "runtime.json")); err == nil || !strings.Contains(err.Error(), "state_dir") {
		t.Fatalf("Prepare = %v, want a state_dir error", err)
	}
}

func TestReadRefusesWhatIsNotAFile(t *testing.T) {
	if _, err := Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Read of a directory = %v", err)
	}
}
