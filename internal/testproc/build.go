package testproc

import (
	"fmt"
	"os/exec"
)

// GoBuild builds the Go command in pkg (a directory, relative to the test's package) into out,
// with -race when race is set. It takes no testing.TB so that a TestMain can call it.
func GoBuild(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	if b, err := exec.Command("go", append(args, pkg)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %v %s: %w\n%s", args, pkg, err, b)
	}
	return nil
}
