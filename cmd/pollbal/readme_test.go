package main

// The documentation's commands are run here so the docs cannot drift: every curl example of the
// admin API in docs/operating.md must succeed against a running pollbal (and print the JSON its
// comment shows), the check example of docs/configuration.md must print what pollbal prints, and
// the README's quick start, `make demo`, must finish with a passing summary. docs/docs_test.go
// checks that docs/configuration.md holds configs/pollbal.yaml verbatim, that the README stays a
// front page and that no link is broken.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pollbal/internal/markdown"
	"pollbal/internal/testproc"
)

// The documents whose commands and examples these tests run.
const (
	readmePath        = "../../README.md"
	operatingPath     = "../../docs/operating.md"
	configurationPath = "../../docs/configuration.md"
	fleetPath         = "../../docs/fleet.md"
)

// readDoc returns the text of the document at path.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// example is one shell command of docs/operating.md with the JSON its comment says it prints.
type example struct {
	cmd  string
	want string // "" when the comment shows no exact JSON
}

// adminExamples collects the curl commands of docs/operating.md's sh blocks that talk to the
// admin listener, joining backslash continuations.
func adminExamples(t *testing.T) []example {
	var out []example
	for _, b := range markdown.FencedBlocks(readDoc(t, operatingPath), "sh") {
		if !strings.Contains(b, "127.0.0.1:9090/admin") {
			continue
		}
		var cmd string
		for _, line := range strings.Split(b, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case cmd != "":
				cmd += " " + strings.TrimSuffix(line, "\\")
				if !strings.HasSuffix(line, "\\") {
					out = append(out, example{cmd: cmd})
					cmd = ""
				}
			case strings.HasPrefix(line, "curl "):
				if strings.HasSuffix(line, "\\") {
					cmd = strings.TrimSuffix(line, "\\")
				} else {
					out = append(out, example{cmd: line})
				}
			case strings.HasPrefix(line, "# {") && len(out) > 0 && out[len(out)-1].want == "":
				if js := strings.TrimPrefix(line, "# "); json.Valid([]byte(js)) {
					out[len(out)-1].want = js
				}
			}
		}
	}
	return out
}

func TestDocsAdminExamples(t *testing.T) {
	examples := adminExamples(t)
	if len(examples) < 4 {
		t.Fatalf("found %d admin curl examples in docs/operating.md, want the pools, move, return and reload calls", len(examples))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	web1 := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	web3 := startBackend(t, "web-3", "127.0.0.1:0", "web serving v1\n")
	pb := startPollbal(t, fmt.Sprintf(`site: eu-west-1
listen: LISTEN
admin:
  listen: ADMIN
  token_file: %s
  state_file: %s
poll: {interval: 500ms, timeout: 450ms}
services: {web: {warning_threshold: 1}}
apps:
  - {name: shop, hosts: ["shop.example.com"], owner: acme}
  - {name: blog, hosts: ["*"]}
backends:
  - {id: web-1, address: %s, owner: acme}
  - {id: web-3, address: %s}
`, filepath.Join(dir, "token"), filepath.Join(dir, "state.json"), web1.addr, web3.addr))
	for _, ex := range examples {
		cmd := strings.ReplaceAll(ex.cmd, "127.0.0.1:9090", pb.admin)
		cmd = strings.Replace(cmd, "curl -s ", "curl -sS --fail-with-body ", 1)
		c := exec.Command("bash", "-c", cmd)
		c.Dir = dir
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		if err := c.Run(); err != nil {
			t.Fatalf("docs/operating.md example failed: %s\n%v\n%s%s", ex.cmd, err, stdout.String(), stderr.String())
		}
		if ex.want != "" {
			var got, want any
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("%s: output is not JSON: %q", ex.cmd, stdout.String())
			}
			_ = json.Unmarshal([]byte(ex.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n got  %s\n want %s (as docs/operating.md says)", ex.cmd, stdout.String(), ex.want)
			}
		}
	}
}

// TestReadmeQuickStartDemo runs the quick start's first command, `make demo`, in its
// non-interactive form and checks the summary.
func TestReadmeQuickStartDemo(t *testing.T) {
	readme := readDoc(t, readmePath)
	if !strings.Contains(readme, "make demo") || !strings.Contains(readme, "make test") {
		t.Fatal("the README's quick start must name make demo and make test")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed for the quick start: %v", err)
	}
	// Free ports, not the config's: another test or run on the machine can hold fixed ones. In a
	// process group of its own, so that a timeout ends make, go run and the demo's children; the
	// output is kept as it comes and logged if the test fails, however it fails.
	demo := testproc.Start(t, "make demo", testproc.Options{Env: append(os.Environ(), "DEMO_ROUNDS=1"), Group: true},
		"make", "-C", "../..", "demo", "BIN="+t.TempDir(), "DEMO_FLAGS=-timings fast -quiet -ports-from-config=false -timeout 90s")
	if code := demo.ExitCode(t, 3*time.Minute); code != 0 {
		t.Fatalf("make demo: exit code %d", code)
	}
	out := demo.Output()
	for _, want := range []string{"requests failed: 0", "backends updated: 4/4", "result: ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("make demo summary lacks %q", want) // the output follows, from the cleanup
		}
	}
}

// TestDocsCheckExample runs docs/configuration.md's `pollbal check` example on the broken.yaml
// it shows and compares the output line for line.
func TestDocsCheckExample(t *testing.T) {
	var broken string
	for _, b := range markdown.FencedBlocks(readDoc(t, configurationPath), "yaml") {
		if strings.HasPrefix(b, "# broken.yaml\n") {
			broken = b
		}
	}
	var console string
	for _, b := range markdown.FencedBlocks(readDoc(t, configurationPath), "console") {
		if strings.HasPrefix(b, "$ pollbal check -config broken.yaml\n") {
			console = b
		}
	}
	if broken == "" || console == "" {
		t.Fatal("docs/configuration.md lacks the broken.yaml block or the pollbal check console block")
	}
	lines := strings.Split(strings.TrimSuffix(console, "\n"), "\n")
	var want []string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "$ ") {
			break
		}
		want = append(want, l)
	}
	path := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := realMain([]string{"check", "-config", path}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1 as docs/configuration.md says", code)
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("pollbal check prints\n%s\ndocs/configuration.md says\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDocsListEveryCommand keeps docs/operating.md's command list in step with `pollbal -h`
// (issue 14: `pollbal version` was missing from the README, where the list was then).
func TestDocsListEveryCommand(t *testing.T) {
	doc := readDoc(t, operatingPath)
	p := usageProgram()
	for _, c := range p.Commands {
		line := p.Synopsis(c)
		if !strings.Contains(doc, "\n"+line+"\n") {
			t.Errorf("docs/operating.md does not show the command line %q of `pollbal -h`", line)
		}
	}
}
