// Package secretfile reads a secret kept in a file (the admin token, the warning signing
// secret, the etcd password): the file's contents with surrounding white space trimmed. An
// empty secret is an error, so that a truncated file never turns authentication or signing
// into a no-op.
package secretfile

import (
	"bytes"
	"fmt"
	"os"
)

// Read returns the trimmed contents of the file at path; an unreadable or empty file is an
// error naming the path.
func Read(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := bytes.TrimSpace(b)
	if len(s) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
