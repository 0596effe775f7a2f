package configs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxFileSize is the largest configuration file pollbal reads: far above any real
// configuration, and small enough that reading and decoding one cannot exhaust memory.
const MaxFileSize = 16 << 20

// Why a configuration file is not read. The reason is part of the config_invalid rejection.
var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = fmt.Errorf("larger than %d MiB", MaxFileSize>>20)
)

// readFile reads the configuration file at path, for run, check and reloads alike. Only a
// regular file (after symlinks) of at most MaxFileSize bytes is read: a named pipe would block the
// reader until someone writes into it, and a device such as /dev/zero never ends. The path is
// checked before it is opened, so opening never blocks and never touches a device; it is opened
// non-blocking and checked again, in case a rename swapped the file in between; and it is read
// through a limit, so a file that grows while it is read still costs at most MaxFileSize bytes.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := readable(fi); err != nil {
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
	if err := readable(fi); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data, err := readLimited(f, fi.Size(), MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// readable says why a file with this information is not read as a configuration, or nil.
func readable(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s)", errNotRegular, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxFileSize {
		return fmt.Errorf("%w (%d bytes)", errTooLarge, fi.Size())
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
			return nil, errTooLarge
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
