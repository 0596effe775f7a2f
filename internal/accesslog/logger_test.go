package accesslog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/configs"
	"pollbal/internal/testproc"
)

// conf is an access_log section with the defaults but for path and a small buffer.
func conf(path string) configs.AccessLog {
	return configs.AccessLog{Path: path, Format: configs.FormatJSON, Sample: 1, Buffer: configs.MinAccessLogBuffer}
}

// newLogger builds a Logger that the test closes at its end; a writer whose flush tick never
// fires unless o sets one, so that only a full buffer, an op or Close writes.
func newLogger(t testing.TB, o Options) *Logger {
	t.Helper()
	if o.flushTick == nil {
		o.flushTick = make(chan time.Time)
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// barrier returns once the writer has written every line logged before it.
func barrier(t testing.TB, l *Logger) {
	t.Helper()
	if err := l.do(op{kind: opUpdate, next: l.cur.Load()}); err != nil {
		t.Fatal(err)
	}
}

// within runs f and fails the test when it has not returned after a generous bound: a Log
// that waited for a blocked disk would never return.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return: Log waited for the writer", what)
	}
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return splitLines(string(data))
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n") {
		return []string{"unterminated: " + s}
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// statusOf reads the status of a JSON line.
func statusOf(t testing.TB, line string) int {
	t.Helper()
	var v struct{ Status int }
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return v.Status
}

func withStatus(status int) *Record {
	r := proxiedRecord()
	r.Status = status
	return r
}

// memWriter keeps what is written; safe for concurrent use.
type memWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed int
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *memWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed++
	return nil
}

func (w *memWriter) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return splitLines(w.buf.String())
}

// gatedWriter is a disk that hangs: every Write waits until gate is closed.
type gatedWriter struct {
	memWriter
	gate    chan struct{}
	entered chan struct{} // gets a value when a Write starts waiting
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.gate
	return w.memWriter.Write(p)
}

// fakeClock is a clock the test moves; safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func newFakeClock(at time.Time) *fakeClock   { c := &fakeClock{}; c.ns.Store(at.UnixNano()); return c }
func opener(w io.WriteCloser) func(string) (io.WriteCloser, error) {
	return func(string) (io.WriteCloser, error) { return w, nil }
}

// warnings keeps the records logged at warn level or above; safe for concurrent use.
type warnings struct {
	mu      sync.Mutex
	records []slog.Record
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.records = append(w.records, r.Clone())
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.records)
}

// attr returns the value of the i-th record's attribute key.
func (w *warnings) attr(i int, key string) slog.Value {
	w.mu.Lock()
	defer w.mu.Unlock()
	var v slog.Value
	w.records[i].Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

func TestLogWritesEveryLineByClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	c := conf(path)
	c.Buffer = 1 << 20 // nothing fills it: only Close writes
	l := newLogger(t, Options{Config: c})
	for _, status := range []int{200, 404, 502} {
		l.Log(withStatus(status))
	}
	if got := readLines(t, path); len(got) != 0 {
		t.Fatalf("written before a full buffer, a tick or Close: %q", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %q", len(lines), lines)
	}
	for i, want := range []int{200, 404, 502} {
		if got := statusOf(t, lines[i]); got != want {
			t.Errorf("line %d has status %d, want %d", i, got, want)
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode&^0o640 != 0 {
		t.Errorf("file mode %v, want at most 0640 (client addresses are personal data)", mode)
	}
}

// TestLogAppends: a log file that exists is appended to, not truncated.
func TestLogAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte("earlier line\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	l := newLogger(t, Options{Config: conf(path)})
	l.Log(withStatus(200))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if lines := readLines(t, path); len(lines) != 2 || lines[0] != "earlier line" {
		t.Errorf("lines %q, want the earlier line and one more", lines)
	}
}

// TestFullBufferIsWritten: once `buffer` bytes wait, the writer writes them without a tick.
func TestFullBufferIsWritten(t *testing.T) {
	w := &memWriter{}
	l := newLogger(t, Options{Config: conf("access.log"), Open: opener(w)})
	line := len(AppendJSON(nil, proxiedRecord()))
	below := (configs.MinAccessLogBuffer - 1) / line
	for range below {
		l.Log(proxiedRecord())
	}
	if got := w.lines(); len(got) != 0 {
		t.Fatalf("%d lines written before the buffer filled", len(got))
	}
	l.Log(proxiedRecord()) // this one fills it
	testproc.WaitFor(t, 10*time.Second, "the full buffer to be written", func() bool { return len(w.lines()) == below+1 })
}

// TestTickWritesWhatWaits: the flush tick writes whatever waits, however little.
func TestTickWritesWhatWaits(t *testing.T) {
	w := &memWriter{}
	tick := make(chan time.Time)
	l := newLogger(t, Options{Config: conf("access.log"), Open: opener(w), flushTick: tick})
	l.Log(proxiedRecord())
	if got := w.lines(); len(got) != 0 {
		t.Fatalf("written before the tick: %q", got)
	}
	tick <- time.Now()
	testproc.WaitFor(t, 10*time.Second, "the tick to write the line", func() bool { return len(w.lines()) == 1 })
}

// TestLinesWrittenWithinSeconds: with the real ticker, a line is written without Close or a
// full buffer (every second; the bound here is generous for a loaded machine).
func TestLinesWrittenWithinSeconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := New(Options{Config: conf(path)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Log(proxiedRecord())
	testproc.WaitFor(t, 10*time.Second, "the ticker to write the line", func() bool { return len(readLines(t, path)) == 1 })
}

func TestLogFilters(t *testing.T) {
	w := &memWriter{}
	c := conf("access.log")
	c.Statuses, c.Sample = []string{"404"}, 0.5
	var draw atomic.Uint64 // the draw in thousandths
	l := newLogger(t, Options{Config: c, Open: opener(w), Draw: func() float64 { return float64(draw.Load()) / 1000 }})
	own := withStatus(404)
	own.Reason, own.End = "no_app", EndRefused

	draw.Store(900)        // sampled out
	l.Log(withStatus(200)) // not listed
	l.Log(withStatus(404)) // listed, sampled out
	l.Log(withStatus(503)) // 5xx: always
	l.Log(own)             // own answer: always
	draw.Store(100)        // sampled in
	l.Log(withStatus(200)) // not listed
	l.Log(withStatus(404)) // listed, sampled in
	barrier(t, l)
	var got []int
	for _, line := range w.lines() {
		got = append(got, statusOf(t, line))
	}
	if want := []int{503, 404, 404}; !slices.Equal(got, want) {
		t.Errorf("logged statuses %v, want %v", got, want)
	}
}

func TestStdout(t *testing.T) {
	out := &memWriter{}
	c := conf(configs.AccessLogStdout)
	c.Format = configs.FormatCombined
	opened := 0
	l := newLogger(t, Options{Config: c, Stdout: out, Open: func(string) (io.WriteCloser, error) {
		opened++
		return nil, errors.New("no file here")
	}})
	l.Log(proxiedRecord())
	if err := l.Reopen(); err != nil {
		t.Errorf("Reopen with path \"-\": %v, want nothing done", err)
	}
	l.Log(proxiedRecord())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := out.lines()
	if len(lines) != 2 || !combinedRe.MatchString(lines[0]+"\n") {
		t.Errorf("standard output got %q, want two combined lines", lines)
	}
	if opened != 0 || out.closed != 0 {
		t.Errorf("a file was opened %d times, standard output closed %d times; want neither", opened, out.closed)
	}
}

func TestNilLoggerIsOff(t *testing.T) {
	var l *Logger
	l.Log(proxiedRecord())
	if l.Enabled() || l.Headers() != nil {
		t.Error("a nil Logger is on")
	}
}

func TestOff(t *testing.T) {
	opened := 0
	l := newLogger(t, Options{Config: conf(configs.AccessLogOff), Open: func(string) (io.WriteCloser, error) {
		opened++
		return nil, errors.New("no file here")
	}})
	if l.Enabled() {
		t.Error("Enabled with path \"\"")
	}
	l.Log(proxiedRecord())
	if err := l.Reopen(); err != nil {
		t.Errorf("Reopen while off: %v", err)
	}
	if opened != 0 {
		t.Errorf("a file was opened %d times while off", opened)
	}
}

// TestSlowDiskDropsLines: while the disk hangs, Log never waits; once 16 buffers wait, lines
// are dropped and counted, and every line is either written or counted.
func TestSlowDiskDropsLines(t *testing.T) {
	w := &gatedWriter{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	reg := prometheus.NewRegistry()
	l := newLogger(t, Options{Config: conf("access.log"), Open: opener(w), Registerer: reg})
	line := len(AppendJSON(nil, proxiedRecord()))
	limit := waitingBuffers * configs.MinAccessLogBuffer
	n := 4 * limit / line
	within(t, "Log on a hung disk", func() {
		for range n {
			l.Log(proxiedRecord())
		}
	})
	dropped := int(testutil.ToFloat64(l.dropped))
	if dropped == 0 {
		t.Fatalf("%d lines of %d bytes on a hung disk and none dropped", n, line)
	}
	close(w.gate)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	written := len(w.lines())
	if written+dropped != n {
		t.Errorf("%d written + %d dropped, want the %d logged", written, dropped, n)
	}
	if written*line > limit {
		t.Errorf("%d bytes waited for the disk, want at most %d", written*line, limit)
	}
	if got := testutil.ToFloat64(l.errs); got != 0 {
		t.Errorf("errors_total = %v, want 0: a slow disk is not an error", got)
	}
	if n, err := testutil.GatherAndCount(reg, "pollbal_access_log_dropped_total", "pollbal_access_log_errors_total"); err != nil || n != 2 {
		t.Errorf("registered metrics: %d, %v; want both", n, err)
	}
}

// TestDevFull: a disk that refuses every write (/dev/full) never holds Log up; the failed
// writes are counted and logged at most once a minute, the next warning saying how many failed
// since.
func TestDevFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	clock := newFakeClock(start)
	warned := &warnings{}
	c := conf("/dev/full")
	l := newLogger(t, Options{Config: c, Now: clock.Now, Logger: slog.New(warned)})
	n := 4 * waitingBuffers * c.Buffer / len(AppendJSON(nil, proxiedRecord()))
	within(t, "Log on /dev/full", func() {
		for range n {
			l.Log(proxiedRecord())
		}
	})
	barrier(t, l)
	failed := int(testutil.ToFloat64(l.errs))
	if failed == 0 {
		t.Fatal("no failed write counted on /dev/full")
	}
	if got := warned.count(); got != 1 {
		t.Fatalf("%d warnings for %d failed writes within a minute, want 1", got, failed)
	}

	clock.Advance(30 * time.Second)
	l.Log(proxiedRecord())
	barrier(t, l)
	if got := int(testutil.ToFloat64(l.errs)); got != failed+1 {
		t.Fatalf("errors_total = %d, want %d", got, failed+1)
	}
	if got := warned.count(); got != 1 {
		t.Fatalf("%d warnings 30 s after the first, want 1", got)
	}

	clock.Advance(31 * time.Second)
	l.Log(proxiedRecord())
	barrier(t, l)
	if got := warned.count(); got != 2 {
		t.Fatalf("%d warnings 61 s after the first, want 2", got)
	}
	if got := warned.attr(1, "failed_since_last_warning").Int64(); got != int64(failed) {
		t.Errorf("the second warning counts %d failed writes since the first, want %d", got, failed)
	}
}

// TestReopenAfterRename is logrotate's cycle: rename the file, SIGUSR1 (Reopen); the lines
// before it are in the renamed file, the ones after it in a new file at the path.
func TestReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l := newLogger(t, Options{Config: conf(path)})
	l.Log(withStatus(200))
	l.Log(withStatus(201))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Log(withStatus(202))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old, cur := readLines(t, path+".1"), readLines(t, path)
	if len(old) != 2 || statusOf(t, old[0]) != 200 || statusOf(t, old[1]) != 201 {
		t.Errorf("rotated file holds %q, want the lines of 200 and 201", old)
	}
	if len(cur) != 1 || statusOf(t, cur[0]) != 202 {
		t.Errorf("new file holds %q, want the line of 202", cur)
	}
}

// TestReopenFailureKeepsTheFile: when the path cannot be opened again, the file in use stays.
func TestReopenFailureKeepsTheFile(t *testing.T) {
	w := &memWriter{}
	calls := 0
	l := newLogger(t, Options{Config: conf("access.log"), Open: func(string) (io.WriteCloser, error) {
		calls++
		if calls > 1 {
			return nil, errors.New("permission denied")
		}
		return w, nil
	}})
	if err := l.Reopen(); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Reopen = %v, want the open error", err)
	}
	l.Log(proxiedRecord())
	barrier(t, l)
	if got := len(w.lines()); got != 1 || w.closed != 0 {
		t.Errorf("after a failed Reopen: %d lines in the old file, closed %d times; want 1 and 0", got, w.closed)
	}
}

// TestUpdateSwitchesFileAndFormat: lines logged before Update are in the old file in the old
// format; after it, in the new file in the new format.
func TestUpdateSwitchesFileAndFormat(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	l := newLogger(t, Options{Config: conf(first)})
	l.Log(withStatus(200))
	l.Log(withStatus(201))
	next := conf(second)
	next.Format = configs.FormatCombined
	if err := l.Update(next); err != nil {
		t.Fatal(err)
	}
	l.Log(withStatus(202))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	a, b := readLines(t, first), readLines(t, second)
	if len(a) != 2 || statusOf(t, a[0]) != 200 || statusOf(t, a[1]) != 201 {
		t.Errorf("old file holds %q, want the JSON lines of 200 and 201", a)
	}
	if len(b) != 1 || !combinedRe.MatchString(b[0]+"\n") || !strings.Contains(b[0], `" 202 `) {
		t.Errorf("new file holds %q, want the combined line of 202", b)
	}
}

// TestUpdateUnderLoadLosesNoLine: while goroutines log without pause, the log switches files
// and formats four times; every line is in exactly one file, in that file's format.
func TestUpdateUnderLoadLosesNoLine(t *testing.T) {
	dir := t.TempDir()
	confs := make([]configs.AccessLog, 4)
	for i := range confs {
		confs[i] = conf(filepath.Join(dir, string(rune('a'+i))+".log"))
		confs[i].Buffer = configs.MaxAccessLogBuffer // nothing is dropped
		if i%2 == 1 {
			confs[i].Format = configs.FormatCombined
		}
	}
	l := newLogger(t, Options{Config: confs[0]})
	const goroutines, each = 4, 2000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			r := proxiedRecord()
			for range each {
				l.Log(r)
			}
		})
	}
	for _, c := range confs[1:] {
		if err := l.Update(c); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range confs {
		lines := readLines(t, c.Path)
		total += len(lines)
		for _, line := range lines {
			if c.Format == configs.FormatCombined && !combinedRe.MatchString(line+"\n") ||
				c.Format == configs.FormatJSON && !json.Valid([]byte(line)) {
				t.Fatalf("%s (%s) holds %q", filepath.Base(c.Path), c.Format, line)
			}
		}
	}
	if dropped := testutil.ToFloat64(l.dropped); total != goroutines*each || dropped != 0 {
		t.Errorf("%d lines in the files, %v dropped; want %d and 0", total, dropped, goroutines*each)
	}
}

func TestUpdateOffAndOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l := newLogger(t, Options{Config: conf(path)})
	l.Log(withStatus(200))
	if err := l.Update(conf(configs.AccessLogOff)); err != nil {
		t.Fatal(err)
	}
	if l.Enabled() {
		t.Error("Enabled after Update to path \"\"")
	}
	l.Log(withStatus(201))
	c := conf(path)
	c.Headers = []string{"X-Forwarded-For"}
	if err := l.Update(c); err != nil {
		t.Fatal(err)
	}
	if !l.Enabled() {
		t.Error("not Enabled after Update back to a path")
	}
	if got := l.Headers(); len(got) != 1 || got[0] != (Header{"X-Forwarded-For", "x_forwarded_for"}) {
		t.Errorf("Headers() = %v after Update", got)
	}
	l.Log(withStatus(202))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 2 || statusOf(t, lines[0]) != 200 || statusOf(t, lines[1]) != 202 {
		t.Errorf("file holds %q, want the lines of 200 and 202 (not 201, logged while off)", lines)
	}
}

// goodLogOnly builds a Logger on good.log, kept in memory (w), that can open no other path.
func goodLogOnly(t *testing.T) (l *Logger, w *memWriter) {
	w = &memWriter{}
	l = newLogger(t, Options{Config: conf("good.log"), Open: func(path string) (io.WriteCloser, error) {
		if path == "good.log" {
			return w, nil
		}
		return nil, errors.New("no such directory")
	}})
	return l, w
}

// TestUpdateFailureChangesNothing: an Update whose path cannot be opened, or whose section is
// invalid, leaves the log as it was.
func TestUpdateFailureChangesNothing(t *testing.T) {
	l, w := goodLogOnly(t)
	bad := conf("missing/dir.log")
	bad.Format = configs.FormatCombined
	if err := l.Update(bad); err == nil {
		t.Error("Update to a path that cannot be opened succeeded")
	}
	invalid := conf("good.log")
	invalid.Sample = 2
	if err := l.Update(invalid); err == nil {
		t.Error("Update with sample 2 succeeded")
	}
	l.Log(proxiedRecord())
	barrier(t, l)
	if lines := w.lines(); len(lines) != 1 || !json.Valid([]byte(lines[0])) || w.closed != 0 {
		t.Errorf("after failed Updates the old file holds %q (closed %d times), want one JSON line", lines, w.closed)
	}
}

// TestPrepareChangesNothingUntilApply: a prepared change has its new file open (so a path
// that cannot be opened fails Prepare, not Apply) but the lines keep going to the old file and
// format until Apply; the lines after Apply go to the new one.
func TestPrepareChangesNothingUntilApply(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	l := newLogger(t, Options{Config: conf(first)})
	next := conf(second)
	next.Format = configs.FormatCombined
	ch, err := l.Prepare(next)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(second); err != nil {
		t.Errorf("Prepare did not open the new file: %v", err)
	}
	l.Log(withStatus(200))
	barrier(t, l)
	if a, b := readLines(t, first), readLines(t, second); len(a) != 1 || statusOf(t, a[0]) != 200 || len(b) != 0 {
		t.Fatalf("before Apply: old file %q, new file %q; want the JSON line of 200 in the old one only", a, b)
	}
	if err := l.Apply(ch); err != nil {
		t.Fatal(err)
	}
	l.Log(withStatus(201))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if b := readLines(t, second); len(b) != 1 || !combinedRe.MatchString(b[0]+"\n") || !strings.Contains(b[0], `" 201 `) {
		t.Errorf("after Apply the new file holds %q, want the combined line of 201", b)
	}
	if err := l.Apply(ch); err == nil {
		t.Error("a change applied twice: no error")
	}
}

// TestPrepareRejects: a section that is invalid, or whose new path cannot be opened, fails
// Prepare, and the log goes on as it was.
func TestPrepareRejects(t *testing.T) {
	l, w := goodLogOnly(t)
	invalid := conf("good.log")
	invalid.Buffer = 1
	for _, c := range []configs.AccessLog{conf("missing/dir.log"), invalid} {
		if ch, err := l.Prepare(c); err == nil {
			ch.Discard()
			t.Errorf("Prepare(%+v) succeeded", c)
		}
	}
	l.Log(proxiedRecord())
	barrier(t, l)
	if lines := w.lines(); len(lines) != 1 || w.closed != 0 {
		t.Errorf("after rejected Prepares the file holds %q (closed %d times), want one line", lines, w.closed)
	}
}

// TestDiscardClosesThePreparedFile: a change that is given up (its reload was rejected for
// another reason) closes the file it opened, once, and can no longer be applied.
func TestDiscardClosesThePreparedFile(t *testing.T) {
	old, prepared := &memWriter{}, &memWriter{}
	l := newLogger(t, Options{Config: conf("a.log"), Open: func(path string) (io.WriteCloser, error) {
		if path == "a.log" {
			return old, nil
		}
		return prepared, nil
	}})
	ch, err := l.Prepare(conf("b.log"))
	if err != nil {
		t.Fatal(err)
	}
	ch.Discard()
	ch.Discard()
	if prepared.closed != 1 {
		t.Errorf("the prepared file was closed %d times, want 1", prepared.closed)
	}
	if err := l.Apply(ch); err == nil {
		t.Error("a discarded change was applied")
	}
	l.Log(proxiedRecord())
	barrier(t, l)
	if len(old.lines()) != 1 || len(prepared.lines()) != 0 || old.closed != 0 {
		t.Errorf("after Discard: old file %d lines (closed %d times), prepared %d; want 1 (0) and 0",
			len(old.lines()), old.closed, len(prepared.lines()))
	}
	var none *Change
	none.Discard() // a reload without a prepared change discards nil
}

// TestApplyAfterAnotherChange: a change prepared while the path was the same, applied after
// another change moved the path, is refused instead of writing to the wrong file.
func TestApplyAfterAnotherChange(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	l := newLogger(t, Options{Config: conf(first)})
	same := conf(first)
	same.Format = configs.FormatCombined
	stale, err := l.Prepare(same)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Update(conf(second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(stale); err == nil {
		t.Error("a change prepared for a.log was applied while the log writes to b.log")
	}
	l.Log(withStatus(200))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if b := readLines(t, second); len(b) != 1 || !json.Valid([]byte(b[0])) {
		t.Errorf("b.log holds %q, want one JSON line", b)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	w := &memWriter{}
	l := newLogger(t, Options{Config: conf("access.log"), Open: opener(w)})
	l.Log(proxiedRecord())
	for range 2 {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(w.lines()); got != 1 || w.closed != 1 {
		t.Errorf("after two Closes: %d lines, file closed %d times; want 1 and 1", got, w.closed)
	}
	l.Log(proxiedRecord())
	if got := testutil.ToFloat64(l.dropped); got != 1 {
		t.Errorf("a line logged after Close: dropped_total %v, want 1", got)
	}
	if err := l.Reopen(); !errors.Is(err, errClosed) {
		t.Errorf("Reopen after Close = %v, want %v", err, errClosed)
	}
	if err := l.Update(conf("other.log")); !errors.Is(err, errClosed) {
		t.Errorf("Update after Close = %v, want %v", err, errClosed)
	}
	if got := w.closed; got != 3 {
		// The files opened for the Reopen and the Update after Close are closed at once too
		// (the opener returns w each time).
		t.Errorf("file closed %d times, want 3", got)
	}
}

func TestNewRejects(t *testing.T) {
	reg := prometheus.NewRegistry()
	newLogger(t, Options{Config: conf(configs.AccessLogOff), Registerer: reg})
	tests := []struct {
		name string
		o    Options
	}{
		{name: "metrics registered twice", o: Options{Config: conf(configs.AccessLogOff), Registerer: reg}},
		{name: "unknown format", o: Options{Config: configs.AccessLog{Format: "xml", Sample: 1, Buffer: 4096}}},
		{name: "buffer too small", o: Options{Config: configs.AccessLog{Format: "json", Sample: 1, Buffer: 10}}},
		{name: "file cannot be opened", o: Options{Config: conf(filepath.Join(t.TempDir(), "missing", "access.log"))}},
	}
	for _, tt := range tests {
		if l, err := New(tt.o); err == nil {
			_ = l.Close()
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
}

// TestLogAllocs guards the request path: Log, filters, formatting and hand-off included,
// allocates nothing once its buffers have grown.
func TestLogAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race (sync.Pool drops items at random)")
	}
	for _, format := range []string{configs.FormatJSON, configs.FormatCombined} {
		c := conf(filepath.Join(t.TempDir(), "access.log"))
		c.Format, c.Sample, c.Buffer = format, 0.5, 256<<10
		l := newLogger(t, Options{Config: c, flushTick: time.Tick(time.Millisecond)})
		r := hostileRecord()
		for range 1000 {
			l.Log(r)
		}
		if n := testing.AllocsPerRun(1000, func() { l.Log(r) }); n != 0 {
			t.Errorf("%s: %v allocations per Log", format, n)
		}
	}
}

// discard is a disk that takes every write at once.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// BenchmarkLog: Log from many goroutines at once, JSON, into a file (where a flood of lines
// outruns the disk and the excess is dropped: dropped/op says how much) and into a writer that
// keeps up (every line is copied to the shared buffer).
func BenchmarkLog(b *testing.B) {
	for _, sink := range []string{"file", "discard"} {
		b.Run(sink, func(b *testing.B) {
			o := Options{Config: conf(filepath.Join(b.TempDir(), "access.log"))}
			if sink == "discard" {
				o.Open = opener(discard{})
			}
			l, reportDropped := benchLogger(b, o)
			b.RunParallel(func(pb *testing.PB) {
				r := proxiedRecord()
				for pb.Next() {
					l.Log(r)
				}
			})
			reportDropped()
		})
	}
}

// BenchmarkLogOneGoroutine: Log from one goroutine into a writer that keeps up, so that the
// writer goroutine has a core of its own and (almost) no line is dropped: the cost of a line
// that is kept.
func BenchmarkLogOneGoroutine(b *testing.B) {
	l, reportDropped := benchLogger(b, Options{Config: conf("access.log"), Open: opener(discard{})})
	r := proxiedRecord()
	for b.Loop() {
		l.Log(r)
	}
	reportDropped()
}

// benchLogger starts a logger with o and a 256 KiB buffer, closed at the end of the benchmark,
// logs enough to grow its buffers, and resets the timer. reportDropped reports the lines dropped
// since, per operation.
func benchLogger(b *testing.B, o Options) (l *Logger, reportDropped func()) {
	o.Config.Buffer = 256 << 10
	l, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	r := proxiedRecord()
	for range 100_000 {
		l.Log(r)
	}
	dropped := testutil.ToFloat64(l.dropped)
	b.ReportAllocs()
	b.ResetTimer()
	return l, func() {
		b.ReportMetric((testutil.ToFloat64(l.dropped)-dropped)/float64(b.N), "dropped/op")
	}
}
