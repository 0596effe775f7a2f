package main

// Issue 28: the etcd walk-through (docs/fleet.md, "Sharing moves across instances") did not run
// as written: it never said where etcd comes from, and its first curl ran before the instances
// listened. This runs its shell block, taken from docs/fleet.md so that the two cannot drift,
// against real processes (bin/pollbal-etcd, two example backends, two pollbal instances) and
// compares what each command prints with the `# → ` line under it.
//
// What is changed before it runs, and nothing else: `make build` (the binaries are built
// here), the fixed ports (free ones instead, in the block and in the examples/fleet copies it
// reads: another test or a real etcd may hold 2379 or 9090), and /tmp/pollbal-fleet (a
// temporary directory).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"pollbal/internal/markdown"
	"pollbal/internal/testproc"
)

// walkthroughPorts are the fixed ports the walk-through and examples/fleet use.
var walkthroughPorts = []string{"2379", "8080", "8081", "9090", "9091", "9201", "9202"}

// expectRe matches a line that shows what the command above it prints.
var expectRe = regexp.MustCompile(`^# → (.*)$`)

// walkthroughBlock returns docs/fleet.md's shell block that runs examples/fleet against etcd.
func walkthroughBlock(t *testing.T) string {
	t.Helper()
	var found []string
	for _, b := range markdown.FencedBlocks(readDoc(t, fleetPath), "shell") {
		if strings.Contains(b, "examples/fleet/$n.yaml") {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("found %d shell blocks running examples/fleet in docs/fleet.md, want 1", len(found))
	}
	return found[0]
}

// walkthroughScript turns the block into a script: each `# → ` line becomes a separator
// that the script prints, and its text the expected output of what ran since the previous one
// (the block sends everything else to log files, so that is the command above it).
func walkthroughScript(block string) (script string, expected []string) {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, line := range strings.Split(block, "\n") {
		if m := expectRe.FindStringSubmatch(line); m != nil {
			expected = append(expected, m[1])
			fmt.Fprintf(&b, "printf '\\n@@ %d\\n'\n", len(expected))
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String(), expected
}

// sameOutput compares a command's output with what docs/fleet.md shows: as JSON when it
// shows JSON (a string "…" stands for any string), else as text.
func sameOutput(got, want string) bool {
	got = strings.TrimSpace(got)
	var g, w any
	if json.Unmarshal([]byte(want), &w) != nil {
		return got == want
	}
	return json.Unmarshal([]byte(got), &g) == nil && matchJSON(g, w)
}

func matchJSON(got, want any) bool {
	switch w := want.(type) {
	case string:
		_, isString := got.(string)
		return (w == "…" && isString) || got == w
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			if gv, ok := g[k]; !ok || !matchJSON(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !matchJSON(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

func TestSameOutput(t *testing.T) {
	for _, tc := range []struct {
		got, want string
		same      bool
	}{
		{got: "200\n", want: "200", same: true},
		{got: "503\n", want: "200"},
		{got: `{"error":"etcd is down","reason":"store_unavailable"}`, want: `{"error":"…","reason":"store_unavailable"}`, same: true},
		{got: `{"error":"x","reason":"other"}`, want: `{"error":"…","reason":"store_unavailable"}`},
		{got: `{"error":1,"reason":"store_unavailable"}`, want: `{"error":"…","reason":"store_unavailable"}`},
		{got: `{"a":[1,2]}`, want: `{"a":[1,2],"b":3}`},
		{got: `not json`, want: `{"a":1}`},
	} {
		if got := sameOutput(tc.got, tc.want); got != tc.same {
			t.Errorf("sameOutput(%q, %q) = %v, want %v", tc.got, tc.want, got, tc.same)
		}
	}
}

func TestEtcdWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and four processes; skipped with -short")
	}
	block := walkthroughBlock(t)
	if !strings.HasPrefix(block, "make build ") {
		t.Fatalf("the walk-through starts with %q; this test replaces its first command, `make build`", strings.SplitN(block, "\n", 2)[0])
	}
	block = ":" + strings.TrimPrefix(block, "make build")

	// A tree with what the block uses: bin/ and examples/fleet/.
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	bin := filepath.Join(root, "bin")
	fleet := filepath.Join(root, "examples", "fleet")
	for _, d := range []string{tmp, bin, fleet} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := testproc.GoBuild(filepath.Join(bin, "pollbal-etcd"), "../pollbal-etcd", false); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"pollbal": bins.pollbal, "example-backend": bins.backend} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	var pairs []string
	for _, port := range walkthroughPorts {
		pairs = append(pairs, "127.0.0.1:"+port, testproc.FreeAddr(t))
	}
	pairs = append(pairs, "/tmp/pollbal-fleet", tmp)
	rewrite := strings.NewReplacer(pairs...)
	for _, name := range []string{"a.yaml", "b.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/fleet", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fleet, name), []byte(rewrite.Replace(string(data))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script, expected := walkthroughScript(rewrite.Replace(block))
	if len(expected) < 5 {
		t.Fatalf("the walk-through shows %d outputs; want the move, the pools, the store, the refusal and the answer", len(expected))
	}
	for _, port := range walkthroughPorts {
		if strings.Contains(script, ":"+port) {
			t.Fatalf("port %s is still in the script after the rewrite: a fixed port the test does not know of", port)
		}
	}

	// In a process group of its own: the background jobs go with it, however the test ends.
	sh := testproc.Start(t, "walk-through", testproc.Options{Group: true}, "bash", "-c", "cd "+root+"\n"+script)
	code := sh.ExitCode(t, 2*time.Minute)
	logs := func() string {
		var b strings.Builder
		for _, name := range []string{"etcd.log", "a.log", "b.log"} {
			data, _ := os.ReadFile(filepath.Join(tmp, name))
			fmt.Fprintf(&b, "--- %s:\n%s", name, data)
		}
		return b.String()
	}
	if code != 0 {
		t.Fatalf("the walk-through exited %d\n%s", code, logs())
	}
	outputs := strings.Split(sh.Stdout(), "\n@@ ")
	if len(outputs) != len(expected)+1 {
		t.Fatalf("the walk-through printed %d outputs, want %d:\n%s", len(outputs)-1, len(expected), sh.Stdout())
	}
	for i, want := range expected {
		got := outputs[i]
		if i > 0 {
			got = strings.SplitN(got, "\n", 2)[1] // the separator's number
		}
		if !sameOutput(got, want) {
			t.Errorf("output %d:\n got  %s\n want %s (as docs/fleet.md shows)", i+1, strings.TrimSpace(got), want)
		}
	}
	if rest := strings.SplitN(outputs[len(expected)], "\n", 2)[1]; strings.TrimSpace(rest) != "" {
		t.Errorf("the walk-through printed %q after its last output", rest)
	}
	if etcdLog, _ := os.ReadFile(filepath.Join(tmp, "etcd.log")); !strings.Contains(string(etcdLog), "etcd serving on 127.0.0.1:") {
		t.Errorf("bin/pollbal-etcd did not say where it listens:\n%s", etcdLog)
	}
	if t.Failed() {
		t.Log(logs())
	}
}
