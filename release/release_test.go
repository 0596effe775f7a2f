package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pollbal/internal/testproc"
)

func TestShellcheck(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (CI installs it)")
	}
	for _, script := range []string{"release.sh", "install.sh", "image.sh"} {
		if out, err := exec.Command(bin, script).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", script, err, out)
		}
	}
}

// TestInstallLayout installs into a DESTDIR with PREFIX=/usr and checks what lands where: the
// binary, the man page, the docs, the units rewritten for the prefix (ExecStart= runs the
// installed binary; every Documentation= target is installed), and the configuration, which
// a second install keeps.
func TestInstallLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pollbal; skipped with -short")
	}
	bin := t.TempDir()
	if err := testproc.GoBuild(filepath.Join(bin, "pollbal"), "../cmd/pollbal", false); err != nil {
		t.Fatal(err)
	}
	page, err := exec.Command(filepath.Join(bin, "pollbal"), "help", "-man").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "pollbal.1"), page, 0o644); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	install := func() string {
		t.Helper()
		out, err := exec.Command("./install.sh", bin, dest, "/usr", "/etc").CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	install()
	for path, mode := range map[string]os.FileMode{
		"/usr/bin/pollbal":                             0o755,
		"/usr/share/man/man1/pollbal.1":                0o644,
		"/usr/share/doc/pollbal/LICENSE":               0o644,
		"/usr/share/doc/pollbal/README.md":             0o644,
		"/usr/share/doc/pollbal/pollbal.yaml":          0o644,
		"/usr/share/doc/pollbal/docs/protocol.md":      0o644,
		"/usr/lib/systemd/system/pollbal.service":      0o644,
		"/usr/lib/systemd/system/pollbal.socket":       0o644,
		"/usr/lib/systemd/system/pollbal-admin.socket": 0o644,
		"/etc/pollbal/pollbal.yaml":                    0o644,
	} {
		fi, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("not installed: %v", err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	unit, err := os.ReadFile(filepath.Join(dest, "/usr/lib/systemd/system/pollbal.service"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(unit), "/usr/local/") {
		t.Errorf("the installed unit still names /usr/local/ paths:\n%s", unit)
	}
	for _, m := range regexp.MustCompile(`(?m)^Exec\w+=(\S+)`).FindAllStringSubmatch(string(unit), -1) {
		if m[1] != "/usr/bin/pollbal" && m[1] != "/bin/kill" {
			t.Errorf("the installed unit runs %s", m[1])
		}
	}
	docs := regexp.MustCompile(`(?m)^Documentation=(.*)$`).FindStringSubmatch(string(unit))
	if docs == nil {
		t.Fatal("the installed unit has no Documentation=")
	}
	for _, d := range strings.Fields(docs[1]) {
		var path string
		switch {
		case d == "man:pollbal(1)":
			path = "/usr/share/man/man1/pollbal.1"
		case strings.HasPrefix(d, "file://"):
			path = strings.TrimPrefix(d, "file://")
		default:
			t.Errorf("Documentation= names %s, which is neither the man page nor an installed file", d)
			continue
		}
		if _, err := os.Stat(filepath.Join(dest, path)); err != nil {
			t.Errorf("Documentation= names %s, which make install does not install: %v", d, err)
		}
	}

	// A second install keeps the configuration an operator edited.
	conf := filepath.Join(dest, "/etc/pollbal/pollbal.yaml")
	if err := os.WriteFile(conf, []byte("# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := install(); !strings.Contains(out, "kept the existing") {
		t.Errorf("the second install did not say it kept the configuration:\n%s", out)
	}
	if data, _ := os.ReadFile(conf); string(data) != "# edited\n" {
		t.Errorf("the second install replaced the configuration: %q", data)
	}
}
