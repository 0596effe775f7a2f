package runstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"pollbal/protocol"
)

// Version is the file format this build writes, and the only one it restores.
const Version = 1

// maxFileSize bounds what Read reads: far above what 10,000 backends take.
const maxFileSize = 64 << 20

// File is the runtime state of one pollbal process. A plain value.
type File struct {
	Version  int       `json:"version"`
	Site     string    `json:"site"`
	Written  time.Time `json:"written"`
	PID      int       `json:"pid"`
	Pollbal  string    `json:"pollbal"` // the version of the pollbal that wrote it
	Backends []Backend `json:"backends"`
}

// Backend is the runtime state of one backend address.
type Backend struct {
	Address string `json:"address"`
	ID      string `json:"id"` // the id it had, for people reading the file; entries are matched by address
	Ready   bool   `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	// Reports are the services the last good answer listed; null when not ready.
	Reports []protocol.Report `json:"reports"`
	Ignored []string          `json:"ignored_services,omitempty"`
	Checked time.Time         `json:"checked"`
	// ReadySince is when slow start began for the backend (zero: it does not apply).
	ReadySince time.Time `json:"ready_since,omitzero"`
	Load       *Load     `json:"load,omitempty"`
	Ejected    bool      `json:"ejected"`
	FailStreak int64     `json:"fail_streak,omitempty"`
	Warned     bool      `json:"warned"`
}

// Load is a backend's last X-Pool-Load report, with what this process had in flight on the
// backend and its limit when the report arrived, and what the report before it said.
type Load struct {
	InFlight   int64     `json:"in_flight"`
	Capacity   int64     `json:"capacity"`
	At         time.Time `json:"at"`
	MineThen   int64     `json:"mine_then"`
	LimitThen  int64     `json:"limit_then"`
	PrevOthers int64     `json:"prev_others,omitempty"`
	PrevAt     time.Time `json:"prev_at,omitzero"`
}

// Encode returns f as the file's bytes.
func Encode(f File) ([]byte, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode runtime state: %w", err)
	}
	return append(data, '\n'), nil
}

// Decode reads a file's bytes. A file of another version is returned with its version, site
// and time only (Decide refuses it); one of this version must be whole and valid, or Decode
// fails: every entry has an address, reports that pollbal's /pool grammar accepts, and no
// negative count.
func Decode(data []byte) (*File, error) {
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("decode runtime state: %w", err)
	}
	if head.Version != Version {
		var f File
		if err := json.Unmarshal(data, &struct {
			Version *int       `json:"version"`
			Site    *string    `json:"site"`
			Written *time.Time `json:"written"`
		}{&f.Version, &f.Site, &f.Written}); err != nil {
			return nil, fmt.Errorf("decode runtime state: %w", err)
		}
		return &f, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode runtime state: %w", err)
	}
	for i, b := range f.Backends {
		if err := b.check(); err != nil {
			return nil, fmt.Errorf("decode runtime state: backends[%d]: %w", i, err)
		}
	}
	return &f, nil
}

// check reports what makes b unusable.
func (b Backend) check() error {
	if b.Address == "" {
		return errors.New("no address")
	}
	if b.Reports != nil {
		// The grammar is protocol's: the reports must read back as they were written.
		got, err := protocol.ParsePool(protocol.FormatPool(b.Reports), maxFileSize)
		if err != nil {
			return fmt.Errorf("reports: %w", err)
		}
		if !slices.Equal(got, b.Reports) {
			return fmt.Errorf("reports %v are not in canonical form", b.Reports)
		}
	}
	if b.FailStreak < 0 {
		return fmt.Errorf("fail_streak %d is negative", b.FailStreak)
	}
	if l := b.Load; l != nil && (l.InFlight < 0 || l.Capacity < 0 || l.MineThen < 0 || l.LimitThen < 0 || l.PrevOthers < 0) {
		return fmt.Errorf("load %+v has a negative count", *l)
	}
	return nil
}

// Read reads and decodes the file at path. A missing file is an error that wraps
// fs.ErrNotExist.
func Read(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case st.Size() > maxFileSize:
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFileSize)
	}
	data := make([]byte, st.Size())
	if _, err := fh.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return Decode(data)
}

// tempPrefix is how write names its temporary file beside the file at path; the rest of the
// name is random.
func tempPrefix(path string) (dir, prefix string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, "." + base + ".tmp-"
}

// write replaces the file at path with data atomically: a temporary file in the same
// directory (mode 0600), fsync, rename over path, fsync of the directory. A crash leaves the
// old file or the new one, never a torn one; the temporary file it may leave is removed by
// RemoveTemps.
func write(path string, data []byte) error {
	dir, prefix := tempPrefix(path)
	tmp, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Prepare makes the directory of the file at path (mode 0750 when it creates it) and removes
// the temporary files that interrupted writes left beside the file.
func Prepare(path string) error {
	dir, prefix := tempPrefix(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("state_dir: %s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), prefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("state_dir: remove temporary files: %w", err)
	}
	return nil
}
