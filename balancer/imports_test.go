package balancer

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportsStayDownstream walks the pollbal packages the balancer's non-test files depend on,
// directly or through each other (what `go list -deps ./balancer` lists), and fails on any that
// data flows into the balancer from or out of it to: the warning round reads the balancer
// through warning.Members, the poller publishes through its Sink, the alarms hear it through
// its Observer port, proxy and admin read it and report to it.
func TestImportsStayDownstream(t *testing.T) {
	forbidden := []string{"pollbal/warning", "pollbal/poller", "pollbal/alarms", "pollbal/proxy", "pollbal/admin", "pollbal/cmd/pollbal"}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	via := map[string]string{"pollbal/balancer": ""} // package → the package that imports it
	queue := []string{"pollbal/balancer"}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		pkg, err := build.Default.ImportDir(filepath.Join(root, strings.TrimPrefix(path, "pollbal")), 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if !strings.HasPrefix(imp, "pollbal/") {
				continue
			}
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = path
			queue = append(queue, imp)
		}
	}
	if len(via) < 3 {
		t.Fatalf("walked only %v: the walk is broken (the balancer imports configs and report)", via)
	}
	for imp, from := range via {
		if slices.Contains(forbidden, imp) {
			t.Errorf("the balancer depends on %s (imported by %s)", imp, from)
		}
	}
}
