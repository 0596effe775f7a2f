package secretfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/regularfile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string
		want    string
		wantErr string
	}{
		{name: "trimmed", content: strPtr("  s3cret\n\n"), want: "s3cret"},
		{name: "inner spaces kept", content: strPtr("a b\n"), want: "a b"},
		{name: "empty is an error", content: strPtr(" \n\t"), wantErr: "is empty"},
		{name: "missing is an error", content: nil, wantErr: "no such file"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "secret"+string(rune('a'+i)))
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Read(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Read() = %q, %v; want an error naming %s and containing %q", got, err, path, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("Read() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func strPtr(s string) *string { return &s }

// TestReadRefusesWhatIsNotASecretFile: a named pipe in place of a secret file is refused at
// once, naming the path (reading it would wait for a writer and block the reload), and so is a
// file over MaxSize.
func TestReadRefusesWhatIsNotASecretFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("s"), MaxSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		wantErr error
		inErr   string
	}{
		{fifo, regularfile.ErrNotRegular, "not a regular file (a named pipe)"},
		{big, regularfile.ErrTooLarge, "larger than 64 KiB (65537 bytes)"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Read(tc.path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.inErr) {
				t.Errorf("Read(%s) = %v; want %v naming the path and saying %q", tc.path, err, tc.wantErr, tc.inErr)
			}
		case <-time.After(10 * time.Second):
			// Open the pipe for writing so that the blocked reader ends with the test.
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			t.Fatalf("Read(%s) still blocked after 10s", tc.path)
		}
	}
}
