package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeIsAFrontPage keeps the README what issue 28 made it: a page a newcomer reads in a
// minute (it had grown to 1,735 lines, with the quick start at line 77), its two commands on
// the first screen, the license named, and the depth in docs/ one link away.
func TestReadmeIsAFrontPage(t *testing.T) {
	text := read(t, "../README.md")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move the depth to docs/", len(lines))
	}
	firstScreen := strings.Join(lines[:min(40, len(lines))], "\n")
	for _, cmd := range []string{"make demo", "make test"} {
		if !strings.Contains(firstScreen, cmd) {
			t.Errorf("README.md does not show %q in its first 40 lines", cmd)
		}
	}
	if !strings.Contains(text, "Apache License, Version 2.0") || !strings.Contains(text, "](LICENSE)") {
		t.Error("README.md does not name the license and link LICENSE")
	}
	docs, err := filepath.Glob("*.md")
	if err != nil || len(docs) < 8 {
		t.Fatalf("docs/*.md: %d pages (%v): the glob is broken", len(docs), err)
	}
	for _, doc := range append(docs, "../bench/README.md") {
		if !strings.Contains(text, "](docs/"+doc+")") && !strings.Contains(text, "]("+strings.TrimPrefix(doc, "../")+")") {
			t.Errorf("README.md does not link %s", filepath.Clean(filepath.Join("docs", doc)))
		}
	}
}

var metricRowRe = regexp.MustCompile("(?m)^\\| `(pollbal_[a-z0-9_]+)")

// TestEveryMetricDocumented: every metric name the product's code spells (a "pollbal_…" string
// literal outside tests) is a row of operating.md's Metrics table, and every row names a metric
// the code has, so that neither can change without the other.
func TestEveryMetricDocumented(t *testing.T) {
	doc := read(t, "operating.md")
	_, section, ok := strings.Cut(doc, "\n## Metrics\n")
	if !ok {
		t.Fatal(`operating.md has no "## Metrics" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range metricRowRe.FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	inCode := metricNamesInCode(t)
	if len(inCode) < 20 {
		t.Fatalf("found only %d metric names in the code: is the scan still right? %v", len(inCode), inCode)
	}
	for _, name := range inCode {
		if !slices.Contains(documented, name) {
			t.Errorf("metric %s is not in operating.md's Metrics table", name)
		}
	}
	for _, name := range documented {
		if !slices.Contains(inCode, name) {
			t.Errorf("operating.md's Metrics table lists %s, which no code defines", name)
		}
	}
}

var metricNameRe = regexp.MustCompile(`^pollbal_[a-z0-9_]+$`)

// metricNamesInCode returns the "pollbal_…" string literals of the repository's non-test Go
// files, sorted and without duplicates.
func metricNamesInCode(t *testing.T) []string {
	t.Helper()
	var names []string
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && metricNameRe.MatchString(s) {
				names = append(names, s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
