package runstate

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"pollbal/internal/defaults"
)

// minInterval is the least time between two writes at the end of check rounds.
const minInterval = time.Second

// due says whether a round ending at now writes the state, the last write having been at last
// (zero: none yet). A clock set back makes it due. It is a pure function.
func due(last, now time.Time) bool {
	return last.IsZero() || now.Before(last) || now.Sub(last) >= minInterval
}

// stamp is the time a write taken at now says the state is from, and whether there is a
// state worth writing: now once a check round has ended in this process (every backend was
// checked by it); before that, the time of the state it restored (its data is that old, so a
// restart before the first round cannot make an old state look young); with neither, nothing
// (this process knows less than the next one would after its first round). It is a pure
// function.
func stamp(rounds bool, restored, now time.Time) (time.Time, bool) {
	switch {
	case rounds:
		return now, true
	case !restored.IsZero():
		return restored, true
	}
	return time.Time{}, false
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	Path    string // the file (configs.Config.RuntimeStatePath)
	Site    string
	Pollbal string // pollbal's version, written into the file
	// Backends captures the state of every backend when a write happens.
	Backends func() []Backend
	Logger   *slog.Logger
	Now      func() time.Time // optional; default time.Now
}

// Writer writes the runtime state file: at the end of a check round at most once a second
// (RoundDone), and when asked (Write). While an upgrade hands over it holds every write, and
// once the new process took over it writes no more: that process's state is newer. Write
// errors are logged when they change, never once per round. It is safe for concurrent use.
type Writer struct {
	o WriterOptions

	mu       sync.Mutex // serialises writes; guards the fields below
	last     time.Time  // the last write attempted
	rounds   bool       // a check round has ended
	restored time.Time  // when the restored state was written; zero: none restored
	held     bool       // an upgrade is handing over
	off      bool       // handed over for good
	failing  string     // the last error logged; "" while writes succeed
}

// NewWriter builds a Writer; it writes nothing until asked.
func NewWriter(o WriterOptions) *Writer {
	o.Logger = defaults.Logger(o.Logger)
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Writer{o: o}
}

// Restored says that the state this process starts from was restored from a file written at
// written.
func (w *Writer) Restored(written time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.restored = written
}

// RoundDone says a check round ended, and writes the state when the last write is at least a
// second old.
func (w *Writer) RoundDone() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rounds = true
	if w.held || w.off || !due(w.last, w.o.Now()) {
		return
	}
	_ = w.writeLocked()
}

// Write writes the state now (see stamp for when there is none to write), unless an upgrade
// holds writes or handed over.
func (w *Writer) Write() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held || w.off {
		return nil
	}
	return w.writeLocked()
}

// HandOver writes the state now, for the process an upgrade is about to start to restore, and
// holds every write from then on until release is called: release(true) when the new process
// took over (this one writes no more), release(false) when the upgrade failed (writes resume).
// After a hand-over it writes nothing.
func (w *Writer) HandOver() (release func(handedOver bool), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.off && !w.held {
		err = w.writeLocked()
	}
	w.held = true
	return func(handedOver bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.held = false
		w.off = w.off || handedOver
	}, err
}

func (w *Writer) writeLocked() error {
	now := w.o.Now()
	written, ok := stamp(w.rounds, w.restored, now)
	if !ok {
		return nil
	}
	w.last = now
	data, err := Encode(File{
		Version: Version, Site: w.o.Site, Written: written.UTC(), PID: os.Getpid(), Pollbal: w.o.Pollbal,
		Backends: w.o.Backends(),
	})
	if err == nil {
		err = write(w.o.Path, data)
	}
	if err != nil {
		err = fmt.Errorf("write runtime state %s: %w", w.o.Path, err)
		if key := errorKey(err); key != w.failing {
			w.failing = key
			w.o.Logger.Warn("cannot write the runtime state; a restart will not restore it", "err", err)
		}
		return err
	}
	if w.failing != "" {
		w.failing = ""
		w.o.Logger.Info("the runtime state is written again", "path", w.o.Path)
	}
	return nil
}

// errorKey is what tells one write error from another: the failing operation and its reason,
// without the temporary file's random name.
func errorKey(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}
