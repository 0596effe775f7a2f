package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pollbal/certs/certstest"
	"pollbal/internal/testproc"
)

var scripts = []string{"run.sh", "setup.sh", "pollbal.sh", "bigbody.sh"}

func TestScriptsParse(t *testing.T) {
	for _, s := range scripts {
		t.Run(s, func(t *testing.T) {
			if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
				t.Fatalf("bash -n %s: %v\n%s", s, err, out)
			}
			fi, err := os.Stat(s)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&0o111 == 0 {
				t.Fatalf("%s is not executable (mode %v)", s, fi.Mode())
			}
		})
	}
}

func TestShellcheck(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (CI installs it)")
	}
	for _, s := range scripts {
		t.Run(s, func(t *testing.T) {
			if out, err := exec.Command(bin, s).CombinedOutput(); err != nil {
				t.Fatalf("shellcheck %s: %v\n%s", s, err, out)
			}
		})
	}
}

// TestRunHelpDocumentsTheHook checks that --help prints the header comment (the line range in
// run.sh follows the comment's length) without starting anything.
func TestRunHelpDocumentsTheHook(t *testing.T) {
	out, err := exec.Command("./run.sh", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh --help: %v\n%s", err, out)
	}
	help := string(out)
	for _, want := range []string{"PROXY_CMD", "READY_TIMEOUT", "127.0.0.1 only"} {
		if !strings.Contains(help, want) {
			t.Errorf("run.sh --help does not mention %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "set -E") {
		t.Errorf("run.sh --help prints code past the header comment:\n%s", help)
	}
}

// TestHarnessIsSelfContained is the regression test for issue 14: the harness needed a
// ../shared/bench checkout next to the repository, so `make bench-harness` failed on a clone.
func TestHarnessIsSelfContained(t *testing.T) {
	files := []string{"../Makefile", "../README.md", "README.md"}
	files = append(files, scripts...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "../shared") {
			t.Errorf("%s refers to ../shared, which a clone does not have", filepath.Clean(f))
		}
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "bench/run.sh") {
		t.Error("Makefile's bench-harness target does not run bench/run.sh")
	}
}

// TestPollbalConfigPassesCheck runs bench/pollbal.sh with a stand-in binary that checks the
// configuration it is given with the real `pollbal check` instead of serving, so the harness's
// pollbal target keeps up with the configuration schema.
func TestPollbalConfigPassesCheck(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "pollbal")
	if err := testproc.GoBuild(real, "../cmd/pollbal", false); err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(dir, "stub")
	// pollbal.sh execs "$POLLBAL_BIN run -config FILE".
	if err := os.WriteFile(stub, []byte("#!/bin/sh\n[ \"$1\" = run ] && [ \"$2\" = -config ] || exit 9\nexec "+real+" check -config \"$3\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		extra string
		tls   bool
	}{
		{name: "defaults"},
		{name: "with POLLBAL_EXTRA", extra: "  slow_start: 0s"},
		{name: "TLS (run.sh TLS=1)", tls: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("./pollbal.sh")
			cmd.Env = append(os.Environ(), "BENCH_LISTEN=127.0.0.1:18099", "BENCH_BACKENDS=127.0.0.1:18081,127.0.0.1:18082",
				"POLLBAL_BIN="+stub, "POLLBAL_EXTRA="+tc.extra, "TMPDIR="+t.TempDir())
			if tc.tls {
				pair := certstest.Write(t, t.TempDir(), "bench", certstest.Options{}, "bench.test")
				cmd.Env = append(cmd.Env, "BENCH_TLS_CERT="+pair.CertFile, "BENCH_TLS_KEY="+pair.KeyFile)
			}
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "ok" {
				t.Fatalf("pollbal.sh's configuration does not pass pollbal check: %v\n%s", err, out)
			}
		})
	}
}
