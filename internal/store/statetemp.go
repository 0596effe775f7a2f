package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix is how saveState names its temporary file beside the state file at path; the rest
// of the name is random.
func tempPrefix(path string) (dir, prefix string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, "." + base + ".tmp-"
}

// removeStaleTemps removes the temporary files that interrupted state-file writes (a crash or
// kill -9 between creating the temporary file and renaming it) left beside the state file at
// path, and returns their names. An empty path removes nothing.
func removeStaleTemps(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	dir, prefix := tempPrefix(path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove stale state temp files: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("remove stale state temp files: %w", errors.Join(errs...))
	}
	return removed, nil
}
