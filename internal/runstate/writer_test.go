package runstate

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStamp(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	restored := now.Add(-20 * time.Second)
	for _, tt := range []struct {
		name     string
		rounds   bool
		restored time.Time
		want     time.Time
		wantOK   bool
	}{
		{"a round ended: the state is from now", true, time.Time{}, now, true},
		{"a round ended after a restore: now", true, restored, now, true},
		{"restored, no round yet: as old as what was restored", false, restored, restored, true},
		{"neither: nothing worth writing", false, time.Time{}, time.Time{}, false},
	} {
		got, ok := stamp(tt.rounds, tt.restored, now)
		if !got.Equal(tt.want) || ok != tt.wantOK {
			t.Errorf("%s: stamp = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestDue(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		last, now time.Time
		want      bool
	}{
		{"first write", time.Time{}, t0, true},
		{"a round 0.5 s after a write", t0, t0.Add(500 * time.Millisecond), false},
		{"a round 1 s after a write", t0, t0.Add(time.Second), true},
		{"clock set back", t0, t0.Add(-time.Minute), true},
	} {
		if got := due(tt.last, tt.now); got != tt.want {
			t.Errorf("%s: due = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// testWriter is a Writer on a file in a temporary directory, with a clock the test moves and a
// count of the captures (one per write).
type testWriter struct {
	*Writer
	path string
	mu   sync.Mutex
	now  time.Time
	n    int // captures
	log  bytes.Buffer
}

func newTestWriter(t *testing.T, dir string) *testWriter {
	tw := &testWriter{path: filepath.Join(dir, "runtime.json"), now: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	tw.Writer = NewWriter(WriterOptions{
		Path: tw.path, Site: "eu", Pollbal: "test",
		Backends: func() []Backend {
			tw.mu.Lock()
			defer tw.mu.Unlock()
			tw.n++
			return []Backend{{Address: "127.0.0.1:9001", ID: "web-1", Ready: true, Checked: tw.now}}
		},
		Logger: slog.New(slog.NewTextHandler(&tw.log, nil)),
		Now: func() time.Time {
			tw.mu.Lock()
			defer tw.mu.Unlock()
			return tw.now
		},
	})
	return tw
}

func (tw *testWriter) advance(d time.Duration) {
	tw.mu.Lock()
	tw.now = tw.now.Add(d)
	tw.mu.Unlock()
}

func (tw *testWriter) writes() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.n
}

func TestWriterRoundsAtMostOnceASecond(t *testing.T) {
	tw := newTestWriter(t, t.TempDir())
	tw.RoundDone()
	for range 3 {
		tw.advance(300 * time.Millisecond)
		tw.RoundDone()
	}
	if n := tw.writes(); n != 1 {
		t.Fatalf("%d writes for rounds within a second, want 1", n)
	}
	tw.advance(100 * time.Millisecond) // 1 s after the first
	tw.RoundDone()
	if n := tw.writes(); n != 2 {
		t.Fatalf("%d writes, want 2 once a second has passed", n)
	}
	f, err := Read(tw.path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != Version || f.Site != "eu" || f.Pollbal != "test" || f.PID != os.Getpid() || !f.Written.Equal(tw.now) || len(f.Backends) != 1 {
		t.Errorf("file %+v", f)
	}
	// Write is not throttled: shutdown writes whatever the last round did.
	if err := tw.Write(); err != nil || tw.writes() != 3 {
		t.Errorf("Write = %v after %d captures, want a third write", err, tw.writes())
	}
}

func TestWriterHandOver(t *testing.T) {
	for _, handedOver := range []bool{false, true} {
		name := map[bool]string{false: "failed upgrade: writes resume", true: "handed over: no more writes"}[handedOver]
		t.Run(name, func(t *testing.T) {
			tw := newTestWriter(t, t.TempDir())
			tw.Restored(tw.now.Add(-10 * time.Second))
			release, err := tw.HandOver()
			if err != nil || tw.writes() != 1 {
				t.Fatalf("HandOver = %v with %d writes, want the state written for the new process", err, tw.writes())
			}
			tw.advance(2 * time.Second)
			tw.RoundDone()
			if err := tw.Write(); err != nil || tw.writes() != 1 {
				t.Fatalf("%d writes while the new process starts, want none: it restored the file as it is", tw.writes()-1)
			}
			release(handedOver)
			tw.advance(2 * time.Second)
			tw.RoundDone()
			_ = tw.Write()
			want := map[bool]int{false: 3, true: 1}[handedOver]
			if n := tw.writes(); n != want {
				t.Errorf("%d writes after the release, want %d", n-1, want-1)
			}
			if handedOver {
				if _, err := tw.HandOver(); err != nil || tw.writes() != 1 {
					t.Errorf("a hand-over after a hand-over wrote (%d writes, %v)", tw.writes(), err)
				}
			}
		})
	}
}

// Before its first round, a process that restored a state writes it with the time it was
// written, so that restarts in a row faster than a round never make an old state look young;
// one that restored nothing has nothing worth writing.
func TestWriterBeforeTheFirstRound(t *testing.T) {
	tw := newTestWriter(t, t.TempDir())
	if err := tw.Write(); err != nil || tw.writes() != 0 {
		t.Fatalf("Write with neither a round nor a restore: %v, %d writes; want none", err, tw.writes())
	}
	written := tw.now.Add(-20 * time.Second)
	tw.Restored(written)
	tw.advance(5 * time.Second)
	if err := tw.Write(); err != nil {
		t.Fatal(err)
	}
	f, err := Read(tw.path)
	if err != nil || !f.Written.Equal(written) {
		t.Fatalf("written %v (%v), want the restored state's time %v", f.Written, err, written)
	}
	tw.advance(time.Second)
	tw.RoundDone()
	if f, err = Read(tw.path); err != nil || !f.Written.Equal(tw.now) {
		t.Fatalf("after a round: written %v (%v), want now %v", f.Written, err, tw.now)
	}
}

func TestWriterLogsAFailureOnceAndTheRecovery(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	tw := newTestWriter(t, dir) // the directory does not exist: every write fails
	for range 3 {
		tw.advance(time.Second)
		tw.RoundDone()
	}
	if err := tw.Write(); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
	if n := strings.Count(tw.log.String(), "cannot write the runtime state"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, tw.log.String())
	}
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	tw.advance(time.Second)
	tw.RoundDone()
	if !strings.Contains(tw.log.String(), "the runtime state is written again") {
		t.Errorf("recovery not logged:\n%s", tw.log.String())
	}
	if _, err := Read(tw.path); err != nil {
		t.Errorf("after the recovery: %v", err)
	}
}
