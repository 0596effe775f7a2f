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

// TestArchitectureImports holds the code to the README's Architecture table: every package it
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
			t.Errorf("package %s/ is not in the README's Architecture table", e.Name())
		}
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
		// A package's own sub-packages (proxy/h2) are part of it: it may import them, and
		// they are held to its row.
		for _, sub := range subPackages(t, dir) {
			for _, imp := range sub.Imports {
				if strings.HasPrefix(imp, "pollbal/") && !slices.Contains(allowed, imp) && !strings.HasPrefix(imp, "pollbal/"+dir+"/") {
					t.Errorf("%s imports %s; the README's Architecture table allows %s/ only %v", sub.ImportPath, imp, dir, allowed)
				}
			}
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "pollbal/") && !slices.Contains(allowed, imp) && !strings.HasPrefix(imp, "pollbal/"+dir+"/") {
				t.Errorf("%s imports %s; the README's Architecture table allows only %v", dir, imp, allowed)
			}
		}
	}
}

// subPackages are the Go packages in the directories under dir (not dir itself).
func subPackages(t *testing.T, dir string) []*build.Package {
	t.Helper()
	var pkgs []*build.Package
	root := filepath.Join("..", dir)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == root {
			return err
		}
		if pkg, err := build.Default.ImportDir(path, 0); err == nil {
			pkg.ImportPath = "pollbal/" + filepath.ToSlash(strings.TrimPrefix(path, "../"))
			pkgs = append(pkgs, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
