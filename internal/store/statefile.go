package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"pollbal/internal/regularfile"
)

// stateVersion is the format version of the state file.
const stateVersion = 1

// maxStateFileSize is the largest state file read, the configuration's limit: far above the
// moves of any fleet. Only a regular file is read, so that a named pipe in its place fails at
// once rather than blocking the start.
const maxStateFileSize = 16 << 20

// stateDoc is the state file: {"version":1,"overrides":{"<backend id>":"<pool>"}}.
type stateDoc struct {
	Version   int   `json:"version"`
	Overrides Moves `json:"overrides"`
}

// Load reads the moves that the state file at path (admin.state_file) kept, after removing the
// temporary files of writes that a crash interrupted (they are never read again). Call it at
// start, before anything writes the state file: a write in progress then would lose its
// temporary file.
func Load(path string, log *slog.Logger) (Moves, error) {
	removed, err := removeStaleTemps(path)
	if len(removed) > 0 {
		log.Info("removed temporary files that interrupted state-file writes left behind", "files", removed)
	}
	if err != nil {
		log.Warn("could not remove every leftover state-file temporary file", "err", err)
	}
	moves, err := ReadState(path)
	if err != nil {
		return nil, fmt.Errorf("admin.state_file: %w", err)
	}
	return moves, nil
}

// ReadState reads the moves persisted at path, changing nothing. An empty path or a missing
// file gives an empty set (nothing was ever moved); a file that cannot be read or parsed is an
// error, never silently dropped, because starting without the moves would put moved backends
// back into pools the operator took them out of.
func ReadState(path string) (Moves, error) {
	data, found, err := readOptional(path)
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	if !found {
		return Moves{}, nil
	}
	moves, err := parseState(data)
	if err != nil {
		return nil, fmt.Errorf("state file %s is corrupt (fix or remove it): %w", path, err)
	}
	return moves, nil
}

// readOptional reads the file at path; found is false, without an error, where there is no file
// to read: an empty path or a file that does not exist.
func readOptional(path string) (data []byte, found bool, err error) {
	if path == "" {
		return nil, false, nil
	}
	data, err = regularfile.Read(path, maxStateFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// parseState decodes and checks a state file's contents.
func parseState(data []byte) (Moves, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty file")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc stateDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON document")
	}
	if doc.Version != stateVersion {
		return nil, fmt.Errorf("unsupported version %d (want %d)", doc.Version, stateVersion)
	}
	out := make(Moves, len(doc.Overrides))
	for id, pool := range doc.Overrides {
		if err := Validate(id, pool); err != nil {
			return nil, fmt.Errorf("override for %q: %w", id, err)
		}
		out[id] = pool
	}
	return out, nil
}

// saveState atomically replaces the state file at path with moves: it writes a temporary file
// in the same directory, fsyncs it, renames it over path and fsyncs the directory, so a crash
// leaves either the old or the new file, never a torn one. It also says whether the file at
// path was replaced: when only the final directory fsync fails, the new contents are in place
// (if not yet durable) and a caller that wants "nothing changed" must write the old contents
// back.
func saveState(path string, moves Moves) (replaced bool, err error) {
	if path == "" {
		return false, errors.New("save state: empty path")
	}
	doc := stateDoc{Version: stateVersion, Overrides: moves}
	if doc.Overrides == nil {
		doc.Overrides = Moves{}
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return false, fmt.Errorf("save state: %w", err)
	}
	data = append(data, '\n')
	dir, prefix := tempPrefix(path)
	tmp, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return false, fmt.Errorf("save state: %w", err)
	}
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp.Name())
		return false, fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return false, fmt.Errorf("save state: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return true, fmt.Errorf("save state: %w", err)
	}
	return true, nil
}

// writeSynced writes data to f, fsyncs and closes it.
func writeSynced(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
