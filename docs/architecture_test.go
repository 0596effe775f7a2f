package docs

import (
	"go/build"
	"io/fs"
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

// TestArchitectureImports holds the code to architecture.md's Packages table: every package of
// the module (internal/ and cmd/ included) is a row, except the examples, the benchmarks, the
// packaging and this package; and each imports (in its non-test files) only the pollbal
// packages its row allows.
func TestArchitectureImports(t *testing.T) {
	table := architectureTable(t)
	// Not the product or its tools: users' examples, the load harness, packaging, these docs.
	outside := []string{"examples", "bench", "release", "docs"}
	dirs := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		dir := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		if path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || slices.Contains(outside, dir)) {
			return filepath.SkipDir
		}
		pkg, err := build.Default.ImportDir(path, 0)
		if err != nil || len(pkg.GoFiles) == 0 {
			return nil // no Go files, or tests only
		}
		dirs++
		if _, listed := table[dir]; !listed {
			t.Errorf("package %s/ is not in architecture.md's Packages table", dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dirs < len(table) {
		t.Errorf("walked %d package directories, fewer than the table's %d rows: the walk is broken", dirs, len(table))
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

// TestBalancerStaysDownstream walks the pollbal packages the balancer's non-test files depend
// on, directly or through each other (what `go list -deps ./balancer` lists), and fails on any
// that data flows into the balancer from or out of it to: the warning round reads the balancer
// through warning.Members, the poller publishes through its Sink, the alarms hear it through
// its Observer port, proxy and admin read it and report to it. The table above holds direct
// imports; this holds the whole chain.
func TestBalancerStaysDownstream(t *testing.T) {
	forbidden := []string{"pollbal/warning", "pollbal/poller", "pollbal/internal/alarms", "pollbal/proxy", "pollbal/admin", "pollbal/cmd/pollbal"}
	via := dependencies(t, "pollbal/balancer")
	if len(via) < 3 {
		t.Fatalf("walked only %v: the walk is broken (the balancer imports configs and protocol)", via)
	}
	for imp, from := range via {
		if slices.Contains(forbidden, imp) {
			t.Errorf("the balancer depends on %s (imported by %s)", imp, from)
		}
	}
}

// dependencies walks the pollbal packages that pkg's non-test files import, directly or
// through each other, and returns each with the package that imports it (pkg itself: "").
func dependencies(t *testing.T, pkg string) map[string]string {
	t.Helper()
	via := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		p, err := build.Default.ImportDir(filepath.Join("..", strings.TrimPrefix(path, "pollbal/")), 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range p.Imports {
			if _, seen := via[imp]; seen || !strings.HasPrefix(imp, "pollbal/") {
				continue
			}
			via[imp] = path
			queue = append(queue, imp)
		}
	}
	return via
}
