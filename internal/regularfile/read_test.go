package regularfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// limit is the configuration's limit, the largest one pollbal reads with.
const limit = 16 << 20

// TestReadRules: only a regular file (a symlink to one included) of at most the limit is read; a
// directory, a named pipe, a socket, a device or a file over the limit is rejected with its
// reason, at once (a named pipe with no writer would otherwise block the reader for good).
func TestReadRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(name, target string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Sparse files: their size without writing it.
	sized := func(name string, size int64) string {
		t.Helper()
		p := write(name, "")
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		return p
	}
	regular := write("regular.yaml", "site: x\n")
	atLimit := sized("at-limit.yaml", limit)
	overLimit := sized("over-limit.yaml", limit+1)
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tests := []struct {
		name    string
		path    string
		limit   int64  // limit when 0
		want    string // the content read
		wantLen int    // or its length, for the large file
		wantErr error
		inErr   string
	}{
		{name: "regular file", path: regular, want: "site: x\n"},
		{name: "symlink to a regular file", path: link("link.yaml", regular), want: "site: x\n"},
		{name: "symlink to a symlink to a regular file", path: link("link2.yaml", filepath.Join(dir, "link.yaml")), want: "site: x\n"},
		{name: "exactly 16 MiB", path: atLimit, wantLen: limit},
		{name: "one byte over 16 MiB", path: overLimit, wantErr: ErrTooLarge, inErr: "larger than 16 MiB (16777217 bytes)"},
		{name: "exactly a smaller limit", path: regular, limit: 8, want: "site: x\n"},
		{name: "over a limit in KiB", path: atLimit, limit: 64 << 10, wantErr: ErrTooLarge, inErr: "larger than 64 KiB (16777216 bytes)"},
		{name: "over a limit in bytes", path: regular, limit: 7, wantErr: ErrTooLarge, inErr: "larger than 7 bytes (8 bytes)"},
		{name: "over a limit of 1 byte", path: regular, limit: 1, wantErr: ErrTooLarge, inErr: "larger than 1 byte (8 bytes)"},
		{name: "over a limit of 1.5 MiB", path: atLimit, limit: 3 << 19, wantErr: ErrTooLarge, inErr: "larger than 1536 KiB (16777216 bytes)"},
		{name: "directory", path: dir, wantErr: ErrNotRegular, inErr: "not a regular file (a directory)"},
		{name: "named pipe", path: fifo, wantErr: ErrNotRegular, inErr: "not a regular file (a named pipe)"},
		{name: "symlink to a named pipe", path: link("fifo-link.yaml", fifo), wantErr: ErrNotRegular, inErr: "not a regular file (a named pipe)"},
		{name: "socket", path: sock, wantErr: ErrNotRegular, inErr: "not a regular file (a socket)"},
		{name: "character device", path: "/dev/zero", wantErr: ErrNotRegular, inErr: "not a regular file (a character device)"},
		{name: "symlink to a device", path: link("zero-link.yaml", "/dev/zero"), wantErr: ErrNotRegular, inErr: "a character device"},
		{name: "missing", path: filepath.Join(dir, "missing.yaml"), wantErr: os.ErrNotExist, inErr: "missing.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := tt.limit
			if lim == 0 {
				lim = limit
			}
			got, err := Read(tt.path, lim)
			if tt.wantLen > 0 {
				if err != nil || len(got) != tt.wantLen {
					t.Fatalf("Read = %d bytes, %v; want %d bytes", len(got), err, tt.wantLen)
				}
				return
			}
			if tt.wantErr == nil {
				if err != nil || string(got) != tt.want {
					t.Fatalf("Read = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.inErr) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("Read = %q, %v; want %v naming %s and saying %q", got, err, tt.wantErr, tt.path, tt.inErr)
			}
		})
	}
}

// endless is a file that keeps growing while it is read: every Read fills the buffer.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestReadLimitedBoundsAGrowingFile: a file that was small when it was checked but grows while it
// is read is rejected after at most limit+1 bytes, not read to its end.
func TestReadLimitedBoundsAGrowingFile(t *testing.T) {
	const limit = 1 << 20
	for _, size := range []int64{0, 10, limit} {
		r := &endless{}
		got, err := readLimited(r, size, limit)
		if !errors.Is(err, ErrTooLarge) || got != nil || err.Error() != "larger than 1 MiB" {
			t.Errorf("size %d: readLimited = %d bytes, %v; want %v saying \"larger than 1 MiB\"", size, len(got), err, ErrTooLarge)
		}
		if r.read > limit+1 {
			t.Errorf("size %d: read %d bytes, want at most %d", size, r.read, limit+1)
		}
	}
	// A file that grows but stays within the limit is read whole.
	got, err := readLimited(strings.NewReader(strings.Repeat("#", 5000)), 10, limit)
	if err != nil || len(got) != 5000 {
		t.Errorf("grown within the limit: readLimited = %d bytes, %v; want 5000", len(got), err)
	}
}
