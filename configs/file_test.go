package configs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadAndReadSettledRejectWhatIsNotAConfigFile: the rule holds for `run` and `check` (Load)
// and for reloads (ReadSettled): a named pipe is rejected as config_invalid at once, and so is
// a file over MaxFileSize.
func TestLoadAndReadSettledRejectWhatIsNotAConfigFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	// A sparse file: over the limit without writing it.
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxFileSize+1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, inErr string }{
		{fifo, "not a regular file (a named pipe)"},
		{big, "larger than 16 MiB"},
	} {
		if _, err := Load(tc.path); err == nil || !strings.Contains(err.Error(), tc.inErr) {
			t.Errorf("Load(%s) = %v, want %q", tc.path, err, tc.inErr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := ReadSettled(ctx, tc.path, time.Millisecond, time.Second)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.inErr) || ReasonOf(err) != ReasonInvalid {
			t.Errorf("ReadSettled(%s) = %v (reason %s), want a config_invalid error saying %q", tc.path, err, ReasonOf(err), tc.inErr)
		}
	}
}
