package prometheus

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAlertRules runs `promtool check rules` and the rules' own unit tests (each alert fires on
// the series it is about at the time it should, with its labels and annotations).
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: prometheus; CI installs it)")
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "check rules", args: []string{"check", "rules", "pollbal-alerts.yaml"}, want: "SUCCESS: 9 rules found"},
		{name: "test rules", args: []string{"test", "rules", "pollbal-alerts_test.yaml"}, want: "SUCCESS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(promtool, tc.args...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
		})
	}
}
