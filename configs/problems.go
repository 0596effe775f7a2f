package configs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// problemList collects path-prefixed problems; its err is a *multierror.Error whose Error
// text is one line, so that a reload failure reads well in a log.
type problemList struct {
	errs []error
}

// problem is one problem at a path of the document; the path lets Parse relate a value that
// could not be decoded (unusable) to what validation then says about it, and find the line of
// the key it is about.
type problem struct {
	path     string
	err      error
	unusable bool
	line     int // the line of the key in the file, 0 when not known or the text already says it
}

func (e *problem) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s: %s (line %d)", e.path, e.err, e.line)
	}
	return e.path + ": " + e.err.Error()
}
func (e *problem) Unwrap() error { return e.err }

func (p *problemList) add(path, format string, args ...any) {
	p.wrap(path, fmt.Errorf(format, args...))
}

// wrap records err (kept for errors.Is/As) under path.
func (p *problemList) wrap(path string, err error) {
	p.errs = append(p.errs, &problem{path: path, err: err})
}

// unusable records that the value at path could not be decoded, so it was left out.
func (p *problemList) unusable(path string, err error) {
	p.errs = append(p.errs, &problem{path: path, err: err, unusable: true})
}

// related reports whether two paths are the same or one holds the other.
func related(a, b string) bool {
	under := func(inner, outer string) bool {
		return strings.HasPrefix(inner, outer+".") || strings.HasPrefix(inner, outer+"[")
	}
	return a == b || under(a, b) || under(b, a)
}

func (p *problemList) err() error { return JoinProblems(p.errs...) }

// JoinProblems returns errs as one error of the form Parse returns, for a caller that checks
// a configuration further (a reload's restart-only keys): its text is the one problem, or
// "N problems: a; b" on one line, and Problems lists each of them. JoinProblems() is nil.
func JoinProblems(errs ...error) error {
	if len(errs) == 0 {
		return nil
	}
	return &multierror.Error{Errors: errs, ErrorFormat: formatProblems}
}

func formatProblems(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("%d problems: %s", len(errs), strings.Join(msgs, "; "))
}

// Problems returns the one-line messages inside an error from Parse, Load or Validate, one per
// problem and in the order they were found (for `pollbal check`, which prints one per line, and
// the admin API's reload answer). Any other list of errors (an error with `Unwrap() []error`,
// such as errors.Join's) is split the same way. Context that the caller wrapped around the list
// is dropped; an error that is not a list (an unreadable file, broken YAML) is returned as its
// own text, one entry per line of it. Problems(nil) is nil.
func Problems(err error) []string {
	if err == nil {
		return nil
	}
	var list *multierror.Error
	if errors.As(err, &list) {
		var out []string
		for _, e := range list.Errors {
			out = append(out, Problems(e)...)
		}
		if len(out) > 0 {
			return out
		}
	}
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		var out []string
		for _, e := range joined.Unwrap() {
			out = append(out, Problems(e)...)
		}
		if len(out) > 0 {
			return out
		}
	}
	var out []string
	for line := range strings.SplitSeq(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}
