package systemd

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pollbal/configs"
	"pollbal/internal/handover"
	"pollbal/internal/testproc"
)

const unitFile = "pollbal.service"

// socketUnits are the socket units that pass pollbal its listening sockets.
var socketUnits = []string{"pollbal.socket", "pollbal-admin.socket"}

// readUnits returns every unit file of this directory by name.
func readUnits(t *testing.T) map[string]string {
	t.Helper()
	units := map[string]string{}
	for _, name := range append([]string{unitFile}, socketUnits...) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		units[name] = string(data)
	}
	return units
}

// manPath returns a MANPATH under which man finds pollbal(1), which the unit's
// Documentation= names and systemd-analyze verify looks up: the page pollbal renders.
func manPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "pollbal")
	if err := testproc.GoBuild(bin, "../../cmd/pollbal", false); err != nil {
		t.Fatal(err)
	}
	page, err := exec.Command(bin, "help", "-man").Output()
	if err != nil {
		t.Fatalf("pollbal help -man: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "man", "man1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "man", "man1", "pollbal.1"), page, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "man") + ":"
}

// verify runs systemd-analyze verify on units, written side by side (with the pollbal binary
// path replaced by an executable that exists here, and man finding pollbal(1) in manPath),
// and returns what it printed; systemd-analyze exits 0 on unknown keys, so any output is a
// finding.
func verify(t *testing.T, bin, manPath string, units map[string]string) string {
	t.Helper()
	true_, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to stand in for the pollbal binary")
	}
	dir := t.TempDir()
	args := []string{"verify"}
	for name, unit := range units {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/pollbal", true_)), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "MANPATH="+manPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out) + "\n" + err.Error()
	}
	return strings.TrimSpace(string(out))
}

func TestUnitVerifies(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian: systemd)")
	}
	units := readUnits(t)
	man := manPath(t)
	if out := verify(t, bin, man, units); out != "" {
		t.Fatalf("systemd-analyze verify %s %s:\n%s", unitFile, strings.Join(socketUnits, " "), out)
	}
	// The check above is only worth something if verify reports a slip: a misspelt key in the
	// service or in a socket unit, or a socket unit for a service that does not exist.
	for _, slip := range []struct{ unit, from, to, reported string }{
		{unitFile, "\nLoadCredential=", "\nLoadCredentials=", "LoadCredentials"},
		{"pollbal-admin.socket", "\nFileDescriptorName=", "\nFileDescriptorNames=", "FileDescriptorNames"},
		{"pollbal-admin.socket", "\nService=pollbal.service", "\nService=pollbl.service", "pollbl.service"},
		{unitFile, "man:pollbal(1)", "man:pollbal-nonesuch(1)", "pollbal-nonesuch"},
	} {
		broken := maps.Clone(units)
		broken[slip.unit] = strings.Replace(units[slip.unit], slip.from, slip.to, 1)
		if broken[slip.unit] == units[slip.unit] {
			t.Fatalf("%s has no %q to break", slip.unit, slip.from)
		}
		if out := verify(t, bin, man, broken); !strings.Contains(out, slip.reported) {
			t.Errorf("systemd-analyze verify did not report %q in %s; got %q", slip.reported, slip.unit, out)
		}
	}
}

// directives returns the values of every line key=value of unit.
func directives(unit, key string) []string {
	var values []string
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(key)+`=(.*)$`).FindAllStringSubmatch(unit, -1) {
		values = append(values, strings.TrimSpace(m[1]))
	}
	return values
}

// sameListenAddr says whether a socket unit's ListenStream= (a port alone: every address)
// listens where the configured address (host:port) does.
func sameListenAddr(stream, configured string) bool {
	host, port, err := net.SplitHostPort(configured)
	if err != nil {
		return false
	}
	if !strings.Contains(stream, ":") {
		return stream == port && (host == "" || net.ParseIP(host).IsUnspecified())
	}
	sHost, sPort, err := net.SplitHostPort(stream)
	return err == nil && sPort == port && net.ParseIP(sHost) != nil && net.ParseIP(sHost).Equal(net.ParseIP(host))
}

// TestSocketUnitsMatchTheConfiguration: the service takes exactly the shipped socket units;
// each passes one socket under a name pollbal knows, for pollbal.service, on the address that
// pollbal.yaml configures for that listener (pollbal refuses a passed socket elsewhere). And
// the service is Type=notify, which pollbal speaks.
func TestSocketUnitsMatchTheConfiguration(t *testing.T) {
	units := readUnits(t)
	service := units[unitFile]
	cfg, err := configs.Load("pollbal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	configured := map[string]string{handover.Proxy: cfg.Listen, handover.TLS: cfg.TLS.Listen, handover.Admin: cfg.Admin.Listen}
	for _, key := range []string{"Sockets", "Requires"} {
		if got := strings.Fields(strings.Join(directives(service, key), " ")); !slices.Equal(got, socketUnits) {
			t.Errorf("%s: %s=%q, want %q", unitFile, key, got, socketUnits)
		}
	}
	if got := directives(service, "Type"); !slices.Equal(got, []string{"notify"}) {
		t.Errorf("%s: Type=%q, want notify", unitFile, got)
	}
	var names []string
	for _, name := range socketUnits {
		unit := units[name]
		fdName := directives(unit, "FileDescriptorName")
		streams := directives(unit, "ListenStream")
		if len(fdName) != 1 || len(streams) != 1 {
			t.Errorf("%s: FileDescriptorName=%q ListenStream=%q, want one of each (pollbal serves one socket per listener)", name, fdName, streams)
			continue
		}
		addr, known := configured[fdName[0]]
		switch {
		case !known:
			t.Errorf("%s: FileDescriptorName=%s, which is not a pollbal listener", name, fdName[0])
		case slices.Contains(names, fdName[0]):
			t.Errorf("%s: FileDescriptorName=%s is another unit's too", name, fdName[0])
		case !sameListenAddr(streams[0], addr):
			t.Errorf("%s: ListenStream=%s, but pollbal.yaml's %s listener is %q", name, streams[0], fdName[0], addr)
		}
		names = append(names, fdName[0])
		if svc := directives(unit, "Service"); !slices.Equal(svc, []string{unitFile}) && !(len(svc) == 0 && name == "pollbal.socket") {
			t.Errorf("%s: Service=%q, want %s", name, svc, unitFile)
		}
	}
}

// TestSameListenAddr: the comparison the test above relies on.
func TestSameListenAddr(t *testing.T) {
	for _, tc := range []struct {
		stream, configured string
		want               bool
	}{
		{"80", ":80", true},
		{"80", "0.0.0.0:80", true},
		{"80", "127.0.0.1:80", false},
		{"80", ":8080", false},
		{"127.0.0.1:9090", "127.0.0.1:9090", true},
		{"127.0.0.1:9090", "127.0.0.2:9090", false},
		{"127.0.0.1:9090", ":9090", false},
		{"[::1]:9090", "[::1]:9090", true},
	} {
		if got := sameListenAddr(tc.stream, tc.configured); got != tc.want {
			t.Errorf("sameListenAddr(%q, %q) = %v, want %v", tc.stream, tc.configured, got, tc.want)
		}
	}
}

// TestConfigUsesTheUnitsCredentials checks that pollbal.yaml reads the token and the secret
// from the copies the unit's LoadCredential= lines make, and keeps its moves and its runtime
// state in the unit's StateDirectory.
func TestConfigUsesTheUnitsCredentials(t *testing.T) {
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	var creds []string
	for _, m := range regexp.MustCompile(`(?m)^LoadCredential=([^:\n]+):(\S+)$`).FindAllStringSubmatch(unit, -1) {
		creds = append(creds, "/run/credentials/pollbal.service/"+m[1])
		if !strings.HasPrefix(m[2], "/etc/pollbal/") {
			t.Errorf("credential %s is loaded from %s, want a file under /etc/pollbal/", m[1], m[2])
		}
	}
	if !strings.Contains(unit, "\nDynamicUser=yes\n") || !strings.Contains(unit, "\nStateDirectory=pollbal\n") {
		t.Fatal("the unit no longer runs as a dynamic user with StateDirectory=pollbal: revisit this test")
	}
	cfg, err := configs.Load("pollbal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, path string }{
		{key: "admin.token_file", path: cfg.Admin.TokenFile},
		{key: "warning.secret_file", path: cfg.Warning.SecretFile},
	} {
		if !slices.Contains(creds, tc.path) {
			t.Errorf("%s = %q, which no LoadCredential= line provides (it provides %q)", tc.key, tc.path, creds)
		}
	}
	if !strings.HasPrefix(cfg.Admin.StateFile, "/var/lib/pollbal/") {
		t.Errorf("admin.state_file = %q, want it in the unit's state directory /var/lib/pollbal/", cfg.Admin.StateFile)
	}
	// ProtectSystem=strict leaves the dynamic user nowhere to write a log but the unit's
	// LogsDirectory (or standard output, the journal).
	switch p := cfg.AccessLog.Path; {
	case p == configs.AccessLogOff || p == configs.AccessLogStdout:
	case !strings.HasPrefix(p, "/var/log/pollbal/"):
		t.Errorf("access_log.path = %q, which the unit cannot write: want it under /var/log/pollbal/", p)
	case !strings.Contains(unit, "\nLogsDirectory=pollbal\n"):
		t.Errorf("access_log.path = %q, but the unit has no LogsDirectory=pollbal to create /var/log/pollbal", p)
	}
	if cfg.StateDir != "/var/lib/pollbal" {
		t.Errorf("state_dir = %q, want the unit's state directory /var/lib/pollbal: a restart through the socket units should restore what the process knew", cfg.StateDir)
	}
	if !strings.Contains(unit, "ExecStartPre=/usr/local/bin/pollbal check -config /etc/pollbal/pollbal.yaml\n") {
		t.Error("the unit does not run the full `pollbal check` (without -skip-files) before start")
	}
}

// exposureRe finds the overall rating in systemd-analyze security's output.
var exposureRe = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d)`)

// exposure rates a service unit with systemd-analyze security, offline.
func exposure(t *testing.T, bin, unit string) float64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), unitFile)
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "security", "--offline=true", path).CombinedOutput()
	m := exposureRe.FindSubmatch(out)
	if m == nil {
		if err != nil && strings.Contains(string(out), "offline") {
			t.Skipf("this systemd-analyze cannot rate a unit offline (systemd 250 or newer can): %s", out)
		}
		t.Fatalf("systemd-analyze security %s: %v\n%s", path, err, out)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Issue 28: the unit rated 4.7 ("OK") in systemd-analyze security: no UMask=, no system call
// filter, W+X memory allowed. It must stay at 2.5 or below.
func TestUnitIsHardened(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian: systemd)")
	}
	unit := readUnits(t)[unitFile]
	got := exposure(t, bin, unit)
	t.Logf("systemd-analyze security: exposure %.1f", got)
	if got > 2.5 {
		t.Errorf("%s rates %.1f in systemd-analyze security, want 2.5 or below", unitFile, got)
	}
	// The rating responds to the sandboxing lines: without them it is far above.
	var bare []string
	for _, line := range strings.Split(unit, "\n") {
		for _, key := range []string{"UMask=", "Protect", "Private", "Restrict", "SystemCall", "LockPersonality=", "MemoryDenyWriteExecute=", "NoNewPrivileges=", "CapabilityBoundingSet="} {
			if strings.HasPrefix(line, key) {
				line = "# " + line
			}
		}
		bare = append(bare, line)
	}
	if without := exposure(t, bin, strings.Join(bare, "\n")); without <= 2.5 {
		t.Errorf("without its sandboxing the unit still rates %.1f: the check above proves nothing", without)
	}
}

// TestUnitDocumentation: Documentation= names the man page and the README that make install
// installs (release/install.sh, with its default PREFIX).
func TestUnitDocumentation(t *testing.T) {
	docs := strings.Fields(strings.Join(directives(readUnits(t)[unitFile], "Documentation"), " "))
	want := []string{"man:pollbal(1)", "file:///usr/local/share/doc/pollbal/README.md"}
	if !slices.Equal(docs, want) {
		t.Errorf("Documentation=%q, want %q", docs, want)
	}
}
