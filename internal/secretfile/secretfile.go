// Package secretfile reads a secret kept in a file (the admin token, the warning signing
// secret, the etcd password): the file's contents with surrounding white space trimmed. An
// empty secret is an error, so that a truncated file never turns authentication or signing
// into a no-op. Only a regular file of at most MaxSize bytes is read, so that a named pipe or a
// device in its place fails at once rather than blocking a reload.
package secretfile

import (
	"bytes"
	"fmt"

	"pollbal/internal/regularfile"
)

// MaxSize is the largest secret file read: far above any token or key, and small enough that a
// wrong path (a log file, an image) is refused rather than held in memory as a secret.
const MaxSize = 64 << 10

// Read returns the trimmed contents of the file at path; an unreadable or empty file, or one
// that is not a regular file of at most MaxSize bytes, is an error naming the path.
func Read(path string) ([]byte, error) {
	b, err := regularfile.Read(path, MaxSize)
	if err != nil {
		return nil, err
	}
	s := bytes.TrimSpace(b)
	if len(s) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
