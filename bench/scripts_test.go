package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var scripts = []string{"run.sh", "setup.sh", "pollbal.sh"}

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
