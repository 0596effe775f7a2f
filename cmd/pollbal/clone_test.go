package main

// Issue 14: what a newcomer runs from `git clone` must work there, with nothing beside the
// clone (no ../shared) and nothing on the machine but Go and the module cache.

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// notPollbalYAML lists the YAML files under configs/ and examples/ that are not pollbal
// configurations, with what they are; every other *.yaml must pass `pollbal check`.
var notPollbalYAML = map[string]string{
	"examples/prometheus/pollbal-alerts.yaml":      "Prometheus alerting rules (checked by promtool)",
	"examples/prometheus/pollbal-alerts_test.yaml": "promtool unit tests of the alerting rules",
}

// cloneRepo clones the repository this test runs in into a temporary directory: the committed
// tree, as a newcomer gets it. It skips where there is no git or no repository (a tarball).
func cloneRepo(t *testing.T) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not inside a git repository (a source tarball): nothing to clone")
	}
	dir := filepath.Join(t.TempDir(), "pollbal")
	if out, err := exec.Command(git, "clone", "--quiet", "--no-hardlinks", strings.TrimSpace(string(top)), dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	return dir
}

// shippedYAML returns the *.yaml files under configs/ and examples/ of root, relative to it.
func shippedYAML(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, sub := range []string{"configs", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, sub), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// fileProblemRe matches a `check` problem about a file a configuration names, at an absolute
// path of the host it is written for (/etc/..., /var/lib/..., /var/log/..., /run/...).
var fileProblemRe = regexp.MustCompile(`^(admin\.token_file|admin\.state_file|warning\.secret_file|access_log\.path): .*open /(etc|var|run)/\S+: no such file or directory$`)

// checkShipped runs `pollbal check` on every shipped YAML file of root, from root. A file that
// names files of its target host (absolute paths, such as the systemd credentials) must fail
// only on those, and pass with -skip-files, as its own comment says.
func checkShipped(t *testing.T, root string) {
	files := shippedYAML(t, root)
	if len(files) < 4 {
		t.Fatalf("found only %d shipped YAML files under %s: %q", len(files), root, files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			if why, ok := notPollbalYAML[f]; ok {
				t.Logf("not a pollbal configuration: %s", why)
				return
			}
			run := func(args ...string) (string, int) {
				cmd := exec.Command(bins.pollbal, append([]string{"check", "-config", f}, args...)...)
				cmd.Dir = root
				out, err := cmd.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return string(out), code
			}
			out, code := run()
			if code == 0 {
				if strings.TrimSpace(out) != "ok" {
					t.Fatalf("pollbal check -config %s: exit 0 but printed %q", f, out)
				}
				return
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !fileProblemRe.MatchString(line) {
					t.Fatalf("pollbal check -config %s (exit %d):\n%s", f, code, out)
				}
			}
			data, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte("pollbal check -skip-files -config "+f)) {
				t.Errorf("%s names files of its target host; its comments must say to check it here with `pollbal check -skip-files -config %s`", f, f)
			}
			if out, code := run("-skip-files"); code != 0 {
				t.Fatalf("pollbal check -skip-files -config %s (exit %d):\n%s", f, code, out)
			}
		})
	}
}

// TestShippedYAMLPassesCheck runs the check on this checkout (fast, and sees uncommitted files).
func TestShippedYAMLPassesCheck(t *testing.T) {
	checkShipped(t, "../..")
}

// TestFreshClone clones the repository and runs there what a newcomer runs first that needs no
// network: `make build`, `pollbal version`, and `pollbal check` on every shipped YAML file.
func TestFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a clone; skipped with -short")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	dir := cloneRepo(t)
	build := exec.Command("make", "build")
	build.Dir = dir
	// Offline: a clone must build from the module cache alone, with no ../shared beside it.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build in a fresh clone: %v\n%s", err, out)
	}
	version := exec.Command(filepath.Join(dir, "bin", "pollbal"), "version")
	out, err := version.Output()
	if err != nil || !regexp.MustCompile(`^pollbal \S+\n$`).Match(out) {
		t.Fatalf("bin/pollbal version: %v %q, want `pollbal <version>`", err, out)
	}
	if strings.Contains(string(out), "pollbal dev") {
		t.Errorf("make build did not stamp the version: %q", out)
	}
	// The other commands the README and bench/README.md show that need neither network nor
	// root: their help, from the clone.
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{cmd: []string{"bin/pollbal", "-h"}, want: "pollbal check -config FILE [-skip-files]"},
		{cmd: []string{"bin/example-backend", "-h"}, want: "usage: example-backend"},
		{cmd: []string{"bench/run.sh", "--help"}, want: "PROXY_CMD"},
		{cmd: []string{"scripts/pollbal-update.sh", "--help"}, want: "Usage: pollbal-update.sh"},
	} {
		cmd := exec.Command(filepath.Join(dir, tc.cmd[0]), tc.cmd[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s in a fresh clone: %v\n%s", strings.Join(tc.cmd, " "), err, out)
		}
	}
	checkShipped(t, dir)
}
