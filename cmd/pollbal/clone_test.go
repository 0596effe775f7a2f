package main

// Issue 14: what a newcomer runs from `git clone` must work there, with nothing beside the
// clone (no ../shared) and nothing on the machine but Go and the module cache.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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
var fileProblemRe = regexp.MustCompile(`^(admin\.token_file|admin\.state_file|warning\.secret_file|access_log\.path): .*(open|stat) /(etc|var|run)/\S+: no such file or directory$`)

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
// network: `make build`, `pollbal version`, and `pollbal check` on every shipped YAML file; then
// what a release is made of: `make release` for this machine's platform, and the tarball's
// binary, configuration and man page, unpacked.
func TestFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a clone; skipped with -short")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	dir := cloneRepo(t)
	// Offline: a clone must build from the module cache alone, with no ../shared beside it.
	offline := append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off")
	runMake := func(args ...string) {
		t.Helper()
		cmd := exec.Command("make", args...)
		cmd.Dir = dir
		cmd.Env = offline
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s in a fresh clone: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	runMake("build")
	head, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(head))
	version := exec.Command(filepath.Join(dir, "bin", "pollbal"), "version")
	out, err := version.Output()
	if err != nil || !versionRe.Match(out) {
		t.Fatalf("bin/pollbal version: %v %q, want `pollbal VERSION (commit COMMIT, GOVERSION)`", err, out)
	}
	if !strings.Contains(string(out), " (commit "+commit+", ") || strings.HasPrefix(string(out), "pollbal dev ") {
		t.Errorf("make build did not stamp the version and the commit %s: %q", commit, out)
	}
	// The other commands the README and bench/README.md show that need neither network nor
	// root: their help, from the clone.
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{cmd: []string{"bin/pollbal", "-h"}, want: "pollbal check -config FILE [-skip-files]"},
		{cmd: []string{"bin/example-backend", "-h"}, want: "usage: example-backend"},
		{cmd: []string{"bin/pollbal-etcd", "-h"}, want: "usage: pollbal-etcd"},
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

	const release = "v0.0.0-clonetest"
	runMake("release", "VERSION="+release, "PLATFORMS=linux/"+runtime.GOARCH)
	checkRelease(t, filepath.Join(dir, "dist"), release, commit)
}

// checkRelease checks what make release left in dist for this machine's platform: the
// tarball SHA256SUMS lists, holding a static binary stamped with version and commit that
// checks the shipped configurations, the man page (rendered where man or groff is installed),
// the license, the README and the systemd units.
func checkRelease(t *testing.T, dist, version, commit string) {
	t.Helper()
	name := "pollbal-" + version + "-linux-" + runtime.GOARCH
	tarball := filepath.Join(dist, name+".tar.gz")
	data, err := os.ReadFile(tarball)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x  %s.tar.gz\n", sha256.Sum256(data), name); string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}
	root := t.TempDir()
	files := untar(t, data, root)
	for _, f := range []string{"pollbal", "pollbal.1", "LICENSE", "README.md", "pollbal.yaml", "docs/configuration.md",
		"systemd/pollbal.service", "systemd/pollbal.socket", "systemd/pollbal-admin.socket", "systemd/pollbal.yaml"} {
		if !slices.Contains(files, name+"/"+f) {
			t.Errorf("%s lacks %s; it holds %q", filepath.Base(tarball), f, files)
		}
	}
	dir := filepath.Join(root, name)
	bin := filepath.Join(dir, "pollbal")
	if dynamic := dynamicELF(t, bin); dynamic != "" {
		t.Errorf("the released binary is not static: %s", dynamic)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pollbal %s (released): %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	want := fmt.Sprintf("pollbal %s (commit %s, %s)\n", version, commit, runtime.Version())
	if got := run("version"); got != want {
		t.Errorf("released pollbal version = %q, want %q", got, want)
	}
	// The commented reference names no file; the systemd one names the unit's credentials and
	// state directory, which exist only on the host it is written for: -skip-files.
	if got := run("check", "-config", "pollbal.yaml"); got != "ok\n" {
		t.Errorf("check -config pollbal.yaml = %q, want ok", got)
	}
	if got := run("check", "-skip-files", "-config", "systemd/pollbal.yaml"); !strings.HasPrefix(got, "ok") {
		t.Errorf("check -skip-files -config systemd/pollbal.yaml = %q, want ok", got)
	}
	page, err := os.ReadFile(filepath.Join(dir, "pollbal.1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := run("help", "-man"); string(page) != want {
		t.Errorf("pollbal.1 is not what the released binary renders (pollbal help -man)")
	}
	var render *exec.Cmd
	if man, err := exec.LookPath("man"); err == nil {
		render = exec.Command(man, "-P", "cat", "-l", "pollbal.1")
	} else if groff, err := exec.LookPath("groff"); err == nil {
		render = exec.Command(groff, "-man", "-Tutf8", "-P-cbou", "pollbal.1")
	} else {
		t.Log("neither man nor groff is installed (Debian: man-db, groff-base): pollbal.1 was not rendered")
		return
	}
	render.Dir = dir
	render.Env = append(os.Environ(), "MANWIDTH=100")
	rendered, err := render.Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(render.Args, " "), err)
	}
	text := regexp.MustCompile(".\b").ReplaceAllString(string(rendered), "") // overstrike bold
	for _, want := range []string{"pollbal check -config FILE [-skip-files]", "-log-format", "EXIT STATUS"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s does not show %q:\n%s", strings.Join(render.Args, " "), want, text)
		}
	}
}

// untar writes the gzipped tar data under dir and returns the names of its regular files.
func untar(t *testing.T, data []byte, dir string) []string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			t.Fatalf("tarball entry %q leaves its directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if h.Uid != 0 || h.Gid != 0 {
				t.Errorf("%s belongs to %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
			files = append(files, h.Name)
		default:
			t.Errorf("tarball entry %q is neither a file nor a directory", h.Name)
		}
	}
}

// dynamicELF says why the ELF binary at path is dynamically linked ("" when it is static):
// it names a program interpreter or shared libraries.
func dynamicELF(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "it has a program interpreter (PT_INTERP)"
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Sprintf("it needs %q", libs)
	}
	return ""
}

func TestDynamicELF(t *testing.T) {
	true_, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1), a dynamically linked program, to look at")
	}
	if why := dynamicELF(t, true_); why == "" {
		t.Errorf("dynamicELF(%s) says it is static", true_)
	}
}
