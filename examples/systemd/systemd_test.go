package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pollbal/configs"
)

const unitFile = "pollbal.service"

// verify runs systemd-analyze verify on unit (with the pollbal binary path replaced by an
// executable that exists here) and returns what it printed; systemd-analyze exits 0 on unknown
// keys, so any output is a finding.
func verify(t *testing.T, bin, unit string) string {
	t.Helper()
	true_, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to stand in for the pollbal binary")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, unitFile)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/pollbal", true_)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "verify", path).CombinedOutput()
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
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	if out := verify(t, bin, unit); out != "" {
		t.Fatalf("systemd-analyze verify %s:\n%s", unitFile, out)
	}
	// The check above is only worth something if verify reports a slip: a misspelt key.
	broken := strings.Replace(unit, "\nLoadCredential=", "\nLoadCredentials=", 1)
	if out := verify(t, bin, broken); !strings.Contains(out, "LoadCredentials") {
		t.Fatalf("systemd-analyze verify did not report a misspelt key; got %q", out)
	}
}

// TestConfigUsesTheUnitsCredentials checks that pollbal.yaml reads the token and the secret
// from the copies the unit's LoadCredential= lines make, and keeps its state in the unit's
// StateDirectory.
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
	if !strings.Contains(unit, "ExecStartPre=/usr/local/bin/pollbal check -config /etc/pollbal/pollbal.yaml\n") {
		t.Error("the unit does not run the full `pollbal check` (without -skip-files) before start")
	}
}
