package docs

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// architectureTable reads the table of architecture.md's Packages section: package directory
// (without the trailing slash) → the pollbal packages it may import, nil for "everything above".
func architectureTable(t *testing.T) map[string][]string {
	t.Helper()
	text := read(t, "architecture.md")
	_, section, ok := strings.Cut(text, "\n## Packages\n")
	if !ok {
		t.Fatal(`architecture.md has no "## Packages" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	table := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		dir := strings.Trim(strings.TrimSpace(cells[1]), "`/")
		allowed := strings.TrimSpace(cells[3])
		switch allowed {
		case "everything above":
			table[dir] = nil
		case "—":
			table[dir] = []string{}
		default:
			for _, name := range strings.Split(allowed, ",") {
				table[dir] = append(table[dir], "pollbal/"+strings.TrimSpace(name))
			}
		}
	}
	if len(table) < 5 {
		t.Fatalf("read only %d rows from architecture.md's Packages table: %v", len(table), table)
	}
	return table
}

// TestArchitectureImports holds the code to architecture.md's Packages table: every package it
// lists imports (in its non-test files) only the pollbal packages its row allows, and every
// top-level package of the product is in the table.
func TestArchitectureImports(t *testing.T) {
	table := architectureTable(t)
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	// Not the product: examples, tools and tests' helpers, packaging, and this package.
	outside := []string{"examples", "scripts", "bench", "internal", "release", "docs"}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || slices.Contains(outside, e.Name()) {
			continue
		}
		pkg, err := build.Default.ImportDir(filepath.Join("..", e.Name()), 0)
		if err != nil {
			continue // no Go files
		}
		if _, listed := table[e.Name()]; !listed && len(pkg.GoFiles) > 0 {
			t.Errorf("package %s/ is not in architecture.md's Packages table", e.Name())
		}
	}
	for dir, allowed := range table {
		pkg, err := build.Default.ImportDir(filepath.Join("..", dir), 0)
		if err != nil {
			t.Errorf("%s (in architecture.md's Packages table): %v", dir, err)
			continue
		}
		if allowed == nil {
			continue
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "pollbal/") && !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s; architecture.md's Packages table allows only %v", dir, imp, allowed)
			}
		}
	}
}
