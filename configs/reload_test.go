package configs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSettle drives the settled read with scripted file contents and a fake clock: every wait
// advances the clock by the gap.
func TestSettle(t *testing.T) {
	const gap, limit = 100 * time.Millisecond, 2 * time.Second
	readErr := errors.New("read: permission denied")
	tests := []struct {
		name      string
		reads     []string // contents of successive reads; the last one repeats
		failAt    int      // 1-based read that fails with readErr; 0 = none
		want      string
		wantErr   error
		wantRead  int // reads made
		wantWaits int
	}{
		{name: "stable file: two reads one gap apart", reads: []string{"a"}, want: "a", wantRead: 2, wantWaits: 1},
		{name: "one change, then still", reads: []string{"a", "ab", "ab"}, want: "ab", wantRead: 3, wantWaits: 2},
		{name: "written in three steps", reads: []string{"", "si", "site: x", "site: x\n", "site: x\n"}, want: "site: x\n", wantRead: 5, wantWaits: 4},
		{name: "back to an earlier content is not settled until two in a row", reads: []string{"a", "b", "a", "a"}, want: "a", wantRead: 4, wantWaits: 3},
		{name: "never still: rejected once the limit passed", reads: changing(40), wantErr: errChanging, wantRead: 21, wantWaits: 20},
		{name: "first read fails", reads: []string{"a"}, failAt: 1, wantErr: readErr, wantRead: 1, wantWaits: 0},
		{name: "a later read fails", reads: []string{"a", "b"}, failAt: 2, wantErr: readErr, wantRead: 2, wantWaits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clock time.Duration
			reads, waits := 0, 0
			read := func() ([]byte, error) {
				reads++
				if reads == tt.failAt {
					return nil, readErr
				}
				return []byte(tt.reads[min(reads, len(tt.reads))-1]), nil
			}
			wait := func(d time.Duration) error {
				if d != gap {
					t.Fatalf("waited %s, want the gap %s", d, gap)
				}
				waits++
				clock += d
				return nil
			}
			got, err := settle(read, wait, func() time.Duration { return clock }, gap, limit)
			switch {
			case tt.wantErr == errChanging:
				if ReasonOf(err) != ReasonChanging || !strings.Contains(err.Error(), "still changing") {
					t.Fatalf("err %v (reason %s), want a config_changing rejection", err, ReasonOf(err))
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case string(got) != tt.want:
				t.Fatalf("settled on %q, want %q", got, tt.want)
			}
			if reads != tt.wantRead || waits != tt.wantWaits {
				t.Fatalf("%d reads and %d waits, want %d and %d", reads, waits, tt.wantRead, tt.wantWaits)
			}
		})
	}
}

// errChanging marks the cases that want a config_changing rejection.
var errChanging = errors.New("config_changing")

func changing(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

func TestSettleStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("site: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSettled(ctx, path, time.Hour, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// TestReadSettledFile reads real files: one that holds still, one a writer keeps growing.
func TestReadSettledFile(t *testing.T) {
	dir := t.TempDir()
	still := filepath.Join(dir, "still.yaml")
	if err := os.WriteFile(still, []byte(baseYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	data, err := ReadSettled(context.Background(), still, 20*time.Millisecond, time.Second)
	if err != nil || string(data) != baseYAML {
		t.Fatalf("ReadSettled = %q, %v", data, err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("settled after %s, before one gap", d)
	}
	if _, err := ReadSettled(context.Background(), filepath.Join(dir, "missing.yaml"), time.Millisecond, time.Second); err == nil || ReasonOf(err) != ReasonInvalid {
		t.Fatalf("missing file: err %v (reason %s), want a config_invalid error", err, ReasonOf(err))
	}

	busy := filepath.Join(dir, "busy.yaml")
	if err := os.WriteFile(busy, []byte(baseYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	f, err := os.OpenFile(busy, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	go func() { // a slow writer: one more line every millisecond until told to stop
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(f, "# %d\n", i); err != nil {
				t.Error(err)
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// The gap is 200 times the writer's period, so two reads a gap apart differ unless the writer
	// is kept off the CPU for the whole gap (50 ms did happen on a loaded 2-core machine under -race).
	got, err := ReadSettled(context.Background(), busy, 200*time.Millisecond, 600*time.Millisecond)
	close(stop)
	wg.Wait()
	if ReasonOf(err) != ReasonChanging {
		t.Fatalf("file growing every millisecond: err %v, want a config_changing rejection (read %q)", err, got)
	}
}

func TestGuard(t *testing.T) {
	be := func(addrs ...string) []Backend {
		var out []Backend
		for i, a := range addrs {
			out = append(out, Backend{ID: fmt.Sprintf("b%d", i), Address: a})
		}
		return out
	}
	apps := []App{{Name: "shop"}}
	six := []string{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003", "127.0.0.1:9004", "127.0.0.1:9005", "127.0.0.1:9006"}
	tests := []struct {
		name     string
		apps     []App
		backends []Backend
		running  []string
		wantErr  string // "" = allowed
	}{
		{name: "same backends", apps: apps, backends: be(six...), running: six},
		{name: "half kept is enough", apps: apps, backends: be(six[:3]...), running: six},
		{name: "fewer than half kept", apps: apps, backends: be(six[:2]...), running: six, wantErr: "keeps 2 of the 6 running backends"},
		{name: "one of two kept", apps: apps, backends: be(six[0]), running: six[:2]},
		{name: "none of one kept", apps: apps, backends: be("127.0.0.1:9999"), running: six[:1], wantErr: "keeps 0 of the 1 running"},
		{name: "truncated address: the backend is not kept", apps: apps, backends: be("127.0.0.1:900"), running: six[:1], wantErr: "keeps 0 of the 1"},
		{name: "new backends added, all running kept", apps: apps, backends: be(append([]string{"127.0.0.1:7000"}, six...)...), running: six},
		{name: "replacing every running backend at once", apps: apps, backends: be("127.0.0.1:8001", "127.0.0.1:8002"), running: six[:2], wantErr: "keeps 0 of the 2"},
		{name: "ids renamed, addresses kept", apps: apps, backends: []Backend{{ID: "x", Address: six[0]}, {ID: "y", Address: six[1]}}, running: six[:2]},
		{name: "another spelling of the same socket", apps: apps, backends: be("localhost:9001", "127.0.0.1:09002"), running: six[:2]},
		{name: "nothing running: only the empty checks apply", apps: apps, backends: be("127.0.0.1:8001"), running: nil},
		{name: "a running address listed twice counts once", apps: apps, backends: be(six[0]), running: []string{six[0], six[0], six[1]}},
		{name: "no app", backends: be(six...), running: six, wantErr: "no app"},
		{name: "no backend", apps: apps, running: six, wantErr: "no backend"},
		{name: "no backend, nothing running", apps: apps, wantErr: "no backend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Guard(&Config{Apps: tt.apps, Backends: tt.backends}, tt.running)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
			}
			if ReasonOf(err) != ReasonGuard {
				t.Fatalf("reason %s, want %s", ReasonOf(err), ReasonGuard)
			}
		})
	}
}

func TestReasonOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "plain error", err: errors.New("x"), want: ReasonInvalid},
		{name: "rejection", err: Reject(ReasonGuard, errors.New("x")), want: ReasonGuard},
		{name: "wrapped rejection", err: fmt.Errorf("reload: %w", Reject(ReasonChanging, errors.New("x"))), want: ReasonChanging},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReasonOf(tt.err); got != tt.want {
				t.Fatalf("ReasonOf = %s, want %s", got, tt.want)
			}
		})
	}
	if Reject(ReasonGuard, nil) != nil {
		t.Fatal("Reject(nil) is not nil")
	}
}

// Regression: a reload of a config cut in the middle (as an editor writing in place leaves it)
// was applied: one backend's address had lost its last digit and the others had vanished; 50 of
// 167 cut points passed validation. Every cut point of a file that leaves fewer than half of
// the running backends is now rejected, by validation or by the guard.
func TestEveryCutThatDropsMostBackendsIsRejected(t *testing.T) {
	var b strings.Builder
	b.WriteString("site: eu-west-1\nlisten: 127.0.0.1:8080\nadmin:\n  listen: 127.0.0.1:9090\nservices:\n  web:\n    warning_threshold: 1\napps:\n  - name: shop\n    hosts: [shop.example.com]\n    service: web\nbackends:\n")
	var running []string
	for i := 1; i <= 6; i++ {
		addr := fmt.Sprintf("127.0.0.1:2810%d", i)
		running = append(running, addr)
		fmt.Fprintf(&b, "  - id: web-%d\n    address: %s\n    capacity: 64\n", i, addr)
	}
	full := b.String()
	if c, err := Parse([]byte(full)); err != nil || Guard(c, running) != nil {
		t.Fatalf("the whole file must pass: %v", err)
	}
	// Up to here fewer than three of the six addresses are whole.
	threshold := strings.Index(full, running[2]) + len(running[2])
	passed, guarded := 0, 0
	for cut := 0; cut < len(full); cut++ {
		c, err := Parse([]byte(full[:cut]))
		if err == nil {
			err = Guard(c, running)
			if err != nil {
				guarded++
			}
		}
		if err == nil {
			passed++
			if cut < threshold {
				t.Errorf("cut at byte %d of %d passes: %q", cut, len(full), full[max(0, cut-30):cut])
			}
		}
	}
	t.Logf("%d cut points: %d pass (each keeps at least half the backends), %d parse but are stopped by the guard",
		len(full), passed, guarded)
}
