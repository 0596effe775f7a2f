package configs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// Reasons a reload is rejected: the admin API answers them, the log writes them, and
// pollbal_config_reloads_rejected_total counts them by reason.
const (
	// ReasonInvalid: the file does not load or validate, or a file it names cannot be used.
	ReasonInvalid = "config_invalid"
	// ReasonRestartRequired: listen, admin.listen, tls.listen, admin.store or site changed; those need a restart.
	ReasonRestartRequired = "restart_required"
	// ReasonChanging: the file did not hold still long enough to be read whole.
	ReasonChanging = "config_changing"
	// ReasonGuard: the configuration would leave no app, no backend, or fewer than half of the
	// backends that are running; only a forced reload applies it.
	ReasonGuard = "reload_guard"
)

// RejectReasons lists every reason a reload can be rejected for.
var RejectReasons = []string{ReasonInvalid, ReasonRestartRequired, ReasonChanging, ReasonGuard}

// Settled reads: a reload reads the file until two reads at least SettleGap apart are
// identical, for at most SettleLimit.
const (
	SettleGap   = 100 * time.Millisecond
	SettleLimit = 2 * time.Second
)

// RejectedError is a rejected reload with its reason; Err says why in words.
type RejectedError struct {
	Reason string
	Err    error
}

func (e *RejectedError) Error() string { return e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

// Reject wraps err as a rejection for reason (nil stays nil).
func Reject(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &RejectedError{Reason: reason, Err: err}
}

// ReasonOf returns the reason of a rejected reload: the RejectedError's reason, or
// config_invalid for any other error.
func ReasonOf(err error) string {
	var r *RejectedError
	if errors.As(err, &r) {
		return r.Reason
	}
	return ReasonInvalid
}

// ReadSettled reads the file at path until two reads at least gap apart are identical and
// returns those contents, so that a file being written in place is never read half-written
// (an editor or a copy that pauses for longer than gap still can, which validation and Guard
// are there for). It gives up with a config_changing rejection when the file has not held
// still within limit of the first read, and returns a read error (config_invalid) at once: a
// path that is not a regular file of at most MaxFileSize bytes is one (see readFile).
func ReadSettled(ctx context.Context, path string, gap, limit time.Duration) ([]byte, error) {
	start := time.Now()
	wait := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	read := func() ([]byte, error) {
		data, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("load config: %w", err)
		}
		return data, nil
	}
	return settle(read, wait, func() time.Duration { return time.Since(start) }, gap, limit)
}

// settle is ReadSettled's decision with reading, waiting and the clock injected: read, wait
// gap, read again, until two consecutive reads are identical or limit has passed.
func settle(read func() ([]byte, error), wait func(time.Duration) error, elapsed func() time.Duration, gap, limit time.Duration) ([]byte, error) {
	prev, err := read()
	if err != nil {
		return nil, err
	}
	reads := 1
	for {
		if err := wait(gap); err != nil {
			return nil, err
		}
		cur, err := read()
		if err != nil {
			return nil, err
		}
		reads++
		if bytes.Equal(prev, cur) {
			return cur, nil
		}
		if elapsed() >= limit {
			return nil, Reject(ReasonChanging, fmt.Errorf(
				"the file was still changing after %s (%d reads %s apart, no two in a row identical); try again once it is written",
				limit, reads, gap))
		}
		prev = cur
	}
}

// Guard decides whether next may replace the running configuration without being forced. It
// rejects (reason reload_guard) a configuration with no app, with no backend, or that keeps
// fewer than half of the running backends: running lists the addresses of the backends that
// are ready now, and a backend is kept when next lists its address (under any id, in any
// spelling of the same socket). A truncated file or a wrong copy then cannot take most of the
// traffic's backends away at once; an operator who means it forces the reload.
func Guard(next *Config, running []string) error {
	switch {
	case len(next.Apps) == 0:
		return Reject(ReasonGuard, errors.New("the new configuration has no app: it would answer every request 404; force the reload if that is intended"))
	case len(next.Backends) == 0:
		return Reject(ReasonGuard, errors.New("the new configuration has no backend: it would answer every request 503; force the reload if that is intended"))
	}
	listed := make(map[string]bool, len(next.Backends))
	for _, b := range next.Backends {
		listed[AddressKey(b.Address)] = true
	}
	kept := 0
	seen := make(map[string]bool, len(running))
	for _, addr := range running {
		k := AddressKey(addr)
		if seen[k] {
			continue
		}
		seen[k] = true
		if listed[k] {
			kept++
		}
	}
	if 2*kept < len(seen) {
		return Reject(ReasonGuard, fmt.Errorf(
			"the new configuration keeps %d of the %d running backends (fewer than half); force the reload if that is intended",
			kept, len(seen)))
	}
	return nil
}

// AddressKey is the identity of a backend address: two spellings of one socket (a loopback
// name and 127.0.0.1, a leading-zero port, an upper-case host) give the same key.
func AddressKey(address string) string { return addressKey(address) }
