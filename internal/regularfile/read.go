package regularfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Why a file is not read. Errors from Read match them with errors.Is.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("larger than the limit")
)

// Read reads the file at path when it is a regular file (after symlinks) of at most limit
// bytes; otherwise it fails at once with an error naming path and matching ErrNotRegular or
// ErrTooLarge. The path is checked before it is opened, so opening never blocks and never
// touches a device; it is opened non-blocking and checked again, in case a rename swapped the
// file in between; and it is read through the limit, so a file that grows while it is read
// still costs at most limit+1 bytes.
func Read(path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := readable(fi, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := readable(fi, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data, err := readLimited(f, fi.Size(), limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// readable says why a file with this information is not read, or nil.
func readable(fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s)", ErrNotRegular, fileKind(fi.Mode()))
	}
	if fi.Size() > limit {
		return &tooLargeError{limit: limit, size: fi.Size()}
	}
	return nil
}

// fileKind names the type of a file that is not regular, for the rejection.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "mode " + m.Type().String()
	}
}

// readLimited reads r to its end, expecting about size bytes, and fails once it has read more
// than limit: it never reads more than limit+1 bytes, whatever r holds.
func readLimited(r io.Reader, size, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit+1)
	// One byte more than expected, so that a file that did not grow ends without a copy.
	data := make([]byte, 0, min(max(size, 0), limit)+1)
	for {
		n, err := lr.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			// The file grew past the limit while it was read: its size is not known.
			return nil, &tooLargeError{limit: limit, size: -1}
		}
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// tooLargeError is a file over the limit: "larger than 16 MiB (16777217 bytes)". A negative
// size is not known (the file grew while it was read).
type tooLargeError struct {
	limit, size int64
}

func (e *tooLargeError) Error() string {
	if e.size < 0 {
		return "larger than " + formatSize(e.limit)
	}
	return fmt.Sprintf("larger than %s (%d bytes)", formatSize(e.limit), e.size)
}

func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }

// formatSize writes a limit the way people set it: in MiB or KiB when it is a whole number of
// them, in bytes otherwise.
func formatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n == 1:
		return "1 byte"
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
