package docs

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// architectureTable reads the README's Architecture table: package directory (without the
// trailing slash) → the pollbal packages it may import, nil for "everything above".
func architectureTable(t *testing.T) map[string][]string {
	t.Helper()
	text := read(t, "../README.md")
	_, section, ok := strings.Cut(text, "\n## Architecture\n")
	if !ok {
		t.Fatal(`README.md has no "## Architecture" section`)
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
		t.Fatalf("read only %d rows from the README's Architecture table: %v", len(table), table)
	}
	return table
}

// subpackageRows are the rows of the packages below a top-level package of the product, in
// the Architecture table's form: directory → the pollbal packages it may import. A package may
// also import its own sub-packages listed here. They are kept here until the table moves out
// of the README (docs/architecture.md), whose rows they are to join.
var subpackageRows = map[string][]string{
	"certs/certstest":  {},
	"proxy/clientconn": {"pollbal/internal/latch", "pollbal/proxy/indexed"},
	"proxy/indexed":    {},
	"proxy/upstream":   {"pollbal/configs", "pollbal/protocol", "pollbal/balancer", "pollbal/proxy/indexed"},
}

// TestArchitectureImports holds the code to the README's Architecture table: every package it
// lists imports (in its non-test files) only the pollbal packages its row allows, and every
// top-level package of the product, and every package below one, is in the table.
func TestArchitectureImports(t *testing.T) {
	table := architectureTable(t)
	for dir, allowed := range subpackageRows {
		if _, listed := table[dir]; listed {
			t.Errorf("%s is in the README's Architecture table now: remove it from subpackageRows", dir)
		}
		table[dir] = allowed
		parent, _, _ := strings.Cut(dir, "/")
		if table[parent] != nil {
			table[parent] = append(table[parent], "pollbal/"+dir)
		}
	}
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
			t.Errorf("package %s/ is not in the README's Architecture table", e.Name())
		}
		subpackagesListed(t, e.Name(), table)
	}
	for dir, allowed := range table {
		pkg, err := build.Default.ImportDir(filepath.Join("..", dir), 0)
		if err != nil {
			t.Errorf("%s (in the README's Architecture table): %v", dir, err)
			continue
		}
		if allowed == nil {
			continue
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "pollbal/") && !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s; the README's Architecture table allows only %v", dir, imp, allowed)
			}
		}
	}
}

// subpackagesListed reports every package below dir (a top-level directory of the product)
// that is not in table.
func subpackagesListed(t *testing.T, dir string, table map[string][]string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel("..", path)
		if err != nil || rel == dir || d.Name() == "testdata" {
			return err
		}
		pkg, err := build.Default.ImportDir(path, 0)
		if err != nil || len(pkg.GoFiles) == 0 {
			return nil // no Go files here
		}
		if _, listed := table[filepath.ToSlash(rel)]; !listed {
			t.Errorf("package %s/ is not in the Architecture table (nor in subpackageRows)", filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
