package runstate

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// maxFuture is how far in the future a file's time may be and still count as fresh: the
// processes that write and read it share a clock, so more means the clock was set back since.
const maxFuture = time.Second

// Input is everything the restore decision depends on.
type Input struct {
	// File is the file read at start; nil when ReadErr is set.
	File *File
	// ReadErr is why no file could be read: wraps fs.ErrNotExist when there is none.
	ReadErr error
	Site    string        // this process's site
	Now     time.Time     // the time of the decision
	MaxAge  time.Duration // poll.restore_max_age
	// Configured holds the configured backend addresses, each as configs.AddressKey spells
	// it, and Key spells an address from the file the same way.
	Configured map[string]bool
	Key        func(address string) string
}

// Decision is what to restore at start.
type Decision struct {
	// Restore is true when Backends are to be restored.
	Restore bool
	// Why says why nothing is restored, for the log; "" when there was no file, or when
	// Restore is true.
	Why string
	// Age is how long ago the file was written (when a file was read).
	Age time.Duration
	// Backends are the file's entries for configured addresses, by address key.
	Backends map[string]Backend
	// Dropped counts the file's entries for addresses the configuration no longer has.
	Dropped int
}

// Decide says whether the state in in.File may be restored, and what of it: only a file of
// this Version, written by the same site less than MaxAge ago (and not more than a second in
// the future), and only its entries for configured addresses (the first one of an address
// listed twice). A file that lists none of them restores nothing. It is a pure function.
func Decide(in Input) Decision {
	if in.ReadErr != nil {
		if errors.Is(in.ReadErr, fs.ErrNotExist) {
			return Decision{}
		}
		return Decision{Why: fmt.Sprintf("unreadable: %v", in.ReadErr)}
	}
	f := in.File
	if f == nil {
		return Decision{}
	}
	age := in.Now.Sub(f.Written)
	d := Decision{Age: age}
	switch {
	case f.Version != Version:
		d.Why = fmt.Sprintf("version %d; this pollbal reads version %d only", f.Version, Version)
	case f.Site != in.Site:
		d.Why = fmt.Sprintf("written by site %q, this is site %q", f.Site, in.Site)
	case f.Written.IsZero():
		d.Why = "it has no time of writing"
	case age < -maxFuture:
		d.Why = fmt.Sprintf("written %s in the future (was the clock set back?)", (-age).Round(time.Millisecond))
	case age >= in.MaxAge:
		d.Why = fmt.Sprintf("written %s ago, not less than poll.restore_max_age (%s)", age.Round(time.Millisecond), in.MaxAge)
	}
	if d.Why != "" {
		return d
	}
	d.Backends = make(map[string]Backend, len(f.Backends))
	for _, b := range f.Backends {
		k := in.Key(b.Address)
		if !in.Configured[k] {
			d.Dropped++
			continue
		}
		if _, dup := d.Backends[k]; !dup {
			d.Backends[k] = b
		}
	}
	if len(d.Backends) == 0 {
		d.Backends = nil
		d.Why = "it lists none of the configured backends"
		return d
	}
	d.Restore = true
	return d
}
