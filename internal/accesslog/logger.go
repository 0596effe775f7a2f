package accesslog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/defaults"
	"pollbal/internal/metric"
)

const (
	// waitingBuffers is how many buffers of lines may wait for the writer; past that, new
	// lines are dropped.
	waitingBuffers = 16
	// flushEvery bounds how long a line waits to be written.
	flushEvery = time.Second
	// warnEvery bounds how often a failing write is logged.
	warnEvery = time.Minute
	// maxPooledLine: a scratch buffer that grew past this for one huge line is not kept.
	maxPooledLine = 64 << 10
)

// errClosed is the answer of Update and Reopen after Close.
var errClosed = errors.New("access log is closed")

// Options configure a Logger.
type Options struct {
	// Config is the access_log section, valid by configs.Validate.
	Config configs.AccessLog
	// Registerer takes pollbal_access_log_dropped_total and pollbal_access_log_errors_total;
	// nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives the write-failure warnings; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the once-a-minute warning; nil: time.Now.
	Now func() time.Time
	// Draw returns a number uniform in [0, 1) for sample. Log calls it from many goroutines at
	// once. nil: math/rand/v2's Float64.
	Draw func() float64
	// Stdout is where path "-" writes; nil: os.Stdout.
	Stdout io.Writer
	// Open opens the file at a path for appending; nil: OpenFile.
	Open func(path string) (io.WriteCloser, error)

	// flushTick, in tests, replaces the writer's one-second ticker.
	flushTick <-chan time.Time
}

// OpenFile opens the file at path for appending, creating it (mode 0640) when it is missing.
func OpenFile(path string) (io.WriteCloser, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open access log: %w", err)
	}
	return f, nil
}

// settings are one access_log configuration, compiled; immutable once built.
type settings struct {
	path     string
	on       bool
	combined bool
	filter   Filter
	headers  []Header
	buffer   int // bytes gathered before a write
	limit    int // bytes that may wait; a line past it is dropped
}

func newSettings(c configs.AccessLog) (*settings, error) {
	if c.Format != configs.FormatJSON && c.Format != configs.FormatCombined {
		return nil, fmt.Errorf("access_log.format %q: must be %q or %q", c.Format, configs.FormatJSON, configs.FormatCombined)
	}
	if c.Buffer < configs.MinAccessLogBuffer || c.Buffer > configs.MaxAccessLogBuffer {
		return nil, fmt.Errorf("access_log.buffer %d: must be from %d to %d", c.Buffer, configs.MinAccessLogBuffer, configs.MaxAccessLogBuffer)
	}
	f, err := NewFilter(c)
	if err != nil {
		return nil, err
	}
	return &settings{
		path:     c.Path,
		on:       c.Path != configs.AccessLogOff,
		combined: c.Format == configs.FormatCombined,
		filter:   f,
		headers:  HeadersOf(c.Headers),
		buffer:   c.Buffer,
		limit:    waitingBuffers * c.Buffer,
	}, nil
}

// appendLine formats r in these settings' format.
func (s *settings) appendLine(dst []byte, r *Record) []byte {
	if s.combined {
		return AppendCombined(dst, r)
	}
	return AppendJSON(dst, r)
}

// Logger writes the access log. Log formats on the caller's goroutine and appends the line to
// a buffer shared under a short lock; one writer goroutine writes the buffer when it holds
// `buffer` bytes, at least every second, and on Update, Reopen and Close. Lines past 16 ×
// buffer waiting (a slow disk) are dropped and counted, never waited for; a failed write is
// counted, loses the lines it held, and is logged at most once a minute.
//
// A Logger is safe for concurrent use: Log from any number of goroutines, Update, Reopen and
// Close from any goroutine, at any time. It must not be copied.
type Logger struct {
	log     *slog.Logger
	now     func() time.Time
	draw    func() float64
	stdout  io.Writer
	open    func(string) (io.WriteCloser, error)
	dropped prometheus.Counter
	errs    prometheus.Counter

	cur     atomic.Pointer[settings] // stored only by the writer, under mu
	scratch sync.Pool                // *[]byte, a line being formatted

	mu     sync.Mutex
	lines  []byte // formatted lines waiting for the writer
	held   int    // bytes the writer has taken from lines and not written yet
	closed bool

	kick chan struct{} // lines holds a buffer's worth
	ops  chan op
	done chan struct{} // closed when the writer has returned

	switching sync.Mutex // one Update, Apply or Reopen at a time: a Reopen's open and its switch go together
	closeOnce sync.Once
	closeErr  error

	w output // the writer goroutine's own
}

// output is where the writer goroutine writes and what it remembers between writes.
type output struct {
	out      io.Writer // nil while the log is off
	file     io.Closer // nil for standard output
	spare    []byte    // the buffer that becomes lines at the next take
	lastWarn time.Time
	unwarned int // failed writes since the last warning
}

// op is a request to the writer goroutine; it answers on done.
type op struct {
	kind opKind
	next *settings // opUpdate
	// switchTo, when set, replaces the output after the lines taken so far are written to
	// the old one; nil with opUpdate keeps the output.
	switchTo *output
	done     chan error
}

type opKind int

const (
	opUpdate opKind = iota
	opReopen
	opClose
)

// New builds a Logger from o, opens its file and starts its writer goroutine; Close stops it.
func New(o Options) (*Logger, error) {
	s, err := newSettings(o.Config)
	if err != nil {
		return nil, fmt.Errorf("new access log: %w", err)
	}
	l := &Logger{
		log:    defaults.Logger(o.Logger),
		now:    o.Now,
		draw:   o.Draw,
		stdout: o.Stdout,
		open:   o.Open,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "pollbal_access_log_dropped_total",
			Help: "Access log lines dropped because too many were waiting to be written (a slow disk)."}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "pollbal_access_log_errors_total",
			Help: "Access log writes that failed; the lines they held are lost."}),
		kick: make(chan struct{}, 1),
		ops:  make(chan op),
		done: make(chan struct{}),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.draw == nil {
		l.draw = rand.Float64
	}
	if l.stdout == nil {
		l.stdout = os.Stdout
	}
	if l.open == nil {
		l.open = OpenFile
	}
	l.scratch.New = func() any {
		b := make([]byte, 0, 1024)
		return &b
	}
	out, err := l.openOutput(s.path)
	if err != nil {
		return nil, fmt.Errorf("new access log: %w", err)
	}
	if err := metric.Register(o.Registerer, l.dropped, l.errs); err != nil {
		if out.file != nil {
			_ = out.file.Close()
		}
		return nil, fmt.Errorf("new access log: register metrics: %w", err)
	}
	l.w = *out
	l.cur.Store(s)
	if s.on {
		l.lines, l.w.spare = make([]byte, 0, 2*s.buffer), make([]byte, 0, 2*s.buffer)
	}
	tick, stop := o.flushTick, func() {}
	if tick == nil {
		ticker := time.NewTicker(flushEvery)
		tick, stop = ticker.C, ticker.Stop
	}
	go l.run(tick, stop)
	return l, nil
}

// openOutput opens what path names: nothing for "", standard output for "-", else the file.
func (l *Logger) openOutput(path string) (*output, error) {
	switch path {
	case configs.AccessLogOff:
		return &output{}, nil
	case configs.AccessLogStdout:
		return &output{out: l.stdout}, nil
	}
	f, err := l.open(path)
	if err != nil {
		return nil, err
	}
	return &output{out: f, file: f}, nil
}

// Enabled reports whether the log is on (access_log.path is set): when it is not, Log does
// nothing and a caller may skip filling the Record. A nil Logger is off.
func (l *Logger) Enabled() bool { return l != nil && l.cur.Load().on }

// Headers returns the request headers the current configuration logs, for Record.Headers.
// The slice is shared: treat it as read-only.
func (l *Logger) Headers() []Header {
	if l == nil {
		return nil
	}
	return l.cur.Load().headers
}

// Log writes r's line if the filters keep it. It formats on the caller's goroutine, does not
// keep r or anything r points to once it returns, never waits for the disk and allocates
// nothing once its buffers have grown. On a nil Logger it does nothing.
func (l *Logger) Log(r *Record) {
	if l == nil {
		return
	}
	s := l.cur.Load()
	if !s.on {
		return
	}
	draw := 0.0
	if s.filter.Sampled() {
		draw = l.draw()
	}
	if !s.filter.Keep(r.Status, r.Duration, r.Reason != "", draw) {
		return
	}
	bp := l.scratch.Get().(*[]byte)
	line := s.appendLine((*bp)[:0], r)

	l.mu.Lock()
	if now := l.cur.Load(); now != s {
		// An Update switched settings while the line was formatted: lines taken before the
		// switch go to the old output, so this one must have the new format (and filters).
		s = now
		line = line[:0]
		if s.on && s.filter.Keep(r.Status, r.Duration, r.Reason != "", draw) {
			line = s.appendLine(line, r)
		}
	}
	kept, full := false, false
	if len(line) > 0 && !l.closed && len(l.lines)+l.held+len(line) <= s.limit {
		l.lines = append(l.lines, line...)
		kept, full = true, len(l.lines) >= s.buffer
	}
	l.mu.Unlock()

	if full {
		select {
		case l.kick <- struct{}{}:
		default: // a kick is pending already
		}
	}
	if len(line) > 0 && !kept {
		l.dropped.Inc()
	}
	if cap(line) <= maxPooledLine {
		*bp = line[:0]
		l.scratch.Put(bp)
	}
}

// Update applies a changed access_log section (a reload) without losing a line: the lines
// logged before it are written where and as the old configuration said, the ones after it as
// the new one says. A new path is opened first; when that fails nothing changes. It returns
// once the writer has switched, which waits for a write in progress. It is Prepare and Apply
// in one go, with no Update, Apply or Reopen in between.
func (l *Logger) Update(c configs.AccessLog) error {
	l.switching.Lock()
	defer l.switching.Unlock()
	ch, err := l.Prepare(c)
	if err == nil {
		err = l.applyChange(ch)
	}
	if err != nil {
		return fmt.Errorf("update access log: %w", err)
	}
	return nil
}

// Change is a changed access_log section made ready by Prepare: compiled, its new file open.
// It is applied once (Apply) or given up (Discard); it is not safe for concurrent use.
type Change struct {
	next *settings
	// switchTo is the output of a new path, nil when the path stays.
	switchTo *output
	done     bool // applied or discarded
}

// Prepare checks a changed access_log section and opens its file when the path changes, and
// changes nothing: a reload prepares the log with its other checks, so that a path that
// cannot be opened rejects the reload whole, and applies it (Apply, which cannot fail on an
// open Logger) once every check has passed. A Change that is not applied must be discarded.
// The Prepare and Apply of one change must not interleave with another Update or Apply
// (reloads take turns); a Reopen may come between them.
func (l *Logger) Prepare(c configs.AccessLog) (*Change, error) {
	next, err := newSettings(c)
	if err != nil {
		return nil, err
	}
	ch := &Change{next: next}
	if next.path != l.cur.Load().path {
		if ch.switchTo, err = l.openOutput(next.path); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// Apply switches to a prepared Change, as Update describes. It fails only after Close, or for
// a Change that is not the one prepared for the current configuration (already applied or
// discarded, or another change was applied since); then nothing changes.
func (l *Logger) Apply(ch *Change) error {
	l.switching.Lock()
	defer l.switching.Unlock()
	return l.applyChange(ch)
}

// applyChange is Apply, with l.switching held.
func (l *Logger) applyChange(ch *Change) error {
	if ch.done {
		return errors.New("access log change already applied or discarded")
	}
	ch.done = true
	if ch.switchTo == nil && ch.next.path != l.cur.Load().path {
		return fmt.Errorf("access log change was prepared for another path than %q", l.cur.Load().path)
	}
	return l.do(op{kind: opUpdate, next: ch.next, switchTo: ch.switchTo})
}

// Discard gives up a Change that will not be applied: the file Prepare opened is closed. It
// does nothing on a Change applied or discarded already, or on nil.
func (ch *Change) Discard() {
	if ch == nil || ch.done {
		return
	}
	ch.done = true
	if ch.switchTo != nil && ch.switchTo.file != nil {
		_ = ch.switchTo.file.Close()
	}
}

// Reopen opens the log's file again at its path (SIGUSR1, after logrotate renamed it): the
// lines logged before it go to the old file, the ones after it to the new one. With the log
// off or on standard output it does nothing. When the path cannot be opened the old file stays
// in use and the error says why.
func (l *Logger) Reopen() error {
	l.switching.Lock()
	defer l.switching.Unlock()
	path := l.cur.Load().path
	if path == configs.AccessLogOff || path == configs.AccessLogStdout {
		return nil
	}
	out, err := l.openOutput(path)
	if err != nil {
		return fmt.Errorf("reopen access log: %w", err)
	}
	if err := l.do(op{kind: opReopen, switchTo: out}); err != nil {
		return fmt.Errorf("reopen access log: %w", err)
	}
	return nil
}

// Close writes the lines waiting, closes the file and stops the writer; lines logged after it
// are dropped and counted. It is idempotent: a second call returns the first one's error.
func (l *Logger) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.do(op{kind: opClose}) })
	return l.closeErr
}

// do hands o to the writer goroutine and waits for its answer. An output o opened is closed
// when the writer has stopped.
func (l *Logger) do(o op) error {
	o.done = make(chan error, 1)
	select {
	case l.ops <- o:
		return <-o.done
	case <-l.done:
		if o.switchTo != nil && o.switchTo.file != nil {
			_ = o.switchTo.file.Close()
		}
		return errClosed
	}
}

// run is the writer goroutine.
func (l *Logger) run(tick <-chan time.Time, stop func()) {
	defer close(l.done)
	defer stop()
	for {
		select {
		case <-l.kick:
			l.write(l.take(nil))
		case <-tick:
			l.write(l.take(nil))
		case o := <-l.ops:
			o.done <- l.apply(o)
			if o.kind == opClose {
				return
			}
		}
	}
}

// apply carries out an op on the writer goroutine.
func (l *Logger) apply(o op) error {
	var under func()
	switch o.kind {
	case opUpdate:
		under = func() { l.cur.Store(o.next) }
	case opClose:
		under = func() { l.closed = true }
	}
	l.write(l.take(under))
	if o.kind == opUpdate && !o.next.on {
		// Off: give the buffers back.
		l.mu.Lock()
		l.lines = nil
		l.mu.Unlock()
		l.w.spare = nil
	}
	if o.switchTo == nil && o.kind != opClose {
		return nil
	}
	var err error
	if l.w.file != nil {
		if err = l.w.file.Close(); err != nil {
			err = fmt.Errorf("close access log: %w", err)
			if o.kind != opClose {
				// The switch went through; the old file's trouble is only worth a line.
				l.log.Warn("access log: closing the old file failed", "err", err)
				err = nil
			}
		}
	}
	l.w.out, l.w.file = nil, nil
	if o.switchTo != nil {
		l.w.out, l.w.file = o.switchTo.out, o.switchTo.file
	}
	return err
}

// take moves the waiting lines out for writing; under, when set, runs under the same lock, so
// that the lines taken are exactly those logged before it.
func (l *Logger) take(under func()) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	batch := l.lines
	l.lines = l.w.spare[:0]
	l.held = len(batch)
	if under != nil {
		under()
	}
	return batch
}

// write writes a batch that take returned to the current output and keeps its buffer.
func (l *Logger) write(batch []byte) {
	if len(batch) > 0 && l.w.out != nil {
		if _, err := l.w.out.Write(batch); err != nil {
			l.errs.Inc()
			l.warn(err)
		}
	}
	l.mu.Lock()
	l.held = 0
	l.mu.Unlock()
	l.w.spare = batch[:0]
}

// warn logs a failed write, at most once per warnEvery.
func (l *Logger) warn(err error) {
	now := l.now()
	if !l.w.lastWarn.IsZero() && now.Sub(l.w.lastWarn) < warnEvery {
		l.w.unwarned++
		return
	}
	l.log.Warn("access log: write failed; its lines are lost", "err", err,
		"failed_since_last_warning", l.w.unwarned, "next_warning_after", warnEvery)
	l.w.lastWarn = now
	l.w.unwarned = 0
}
