package main

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pollbal/internal/cmdline"
	"pollbal/internal/testproc"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    string
		wantErr error
		stderr  string
	}{
		{name: "defaults", args: "-data-dir d"},
		{name: "IPv6 loopback", args: "-data-dir d -listen [::1]:2379 -peer [::1]:2380"},
		{name: "help", args: "-h", wantErr: flag.ErrHelp, stderr: "usage: pollbal-etcd -data-dir DIR"},
		{name: "no data dir", args: "", wantErr: cmdline.ErrUsage, stderr: "-data-dir is required"},
		{name: "every interface", args: "-data-dir d -listen 0.0.0.0:2379", wantErr: cmdline.ErrUsage, stderr: "want a loopback address"},
		{name: "a public peer address", args: "-data-dir d -peer 192.0.2.1:2380", wantErr: cmdline.ErrUsage, stderr: "-peer 192.0.2.1:2380: want a loopback address"},
		{name: "a host name", args: "-data-dir d -listen localhost:2379", wantErr: cmdline.ErrUsage, stderr: "want a loopback address"},
		{name: "an argument left over", args: "-data-dir d now", wantErr: cmdline.ErrUsage, stderr: "unexpected arguments: now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseFlags(strings.Fields(tc.args), &stderr)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(stderr.String(), tc.stderr) || (tc.stderr == "") != (stderr.Len() == 0) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.stderr)
			}
		})
	}
}

// TestRunServesAndSaysWhere: the server answers on the address it prints, and stops when its
// context ends.
func TestRunServesAndSaysWhere(t *testing.T) {
	addr := testproc.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, stderr testproc.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-listen", addr, "-data-dir", filepath.Join(t.TempDir(), "data")}, &out, &stderr)
	}()
	want := "etcd serving on " + addr + " "
	testproc.WaitFor(t, 30*time.Second, "the serving line", func() bool { return strings.HasPrefix(out.String(), want) })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after the context ended; stderr %q", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
