package nginx

import (
	"os/exec"
	"testing"
)

func TestShellcheckRunScript(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (CI installs it)")
	}
	if out, err := exec.Command(bin, "run.sh").CombinedOutput(); err != nil {
		t.Fatalf("shellcheck run.sh: %v\n%s", err, out)
	}
}
