package scripts

import (
	"os/exec"
	"testing"
)

func TestShellcheck(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (CI installs it)")
	}
	tests := []struct {
		name string
		file string
	}{
		{name: "update script", file: updateScript},
		{name: "pool warning CGI", file: cgiScript},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := exec.Command(bin, tc.file).CombinedOutput(); err != nil {
				t.Fatalf("shellcheck %s: %v\n%s", tc.file, err, out)
			}
		})
	}
}
