package protocol

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// wireName finds a string literal that spells a header name of the protocol, whatever its case:
// "X-Pool-Load", "X-Pool-Full", or one starting with "X-Pollbal-" (raw strings too).
var wireName = regexp.MustCompile("(?i)[\"`](x-pool-load[\"`]|x-pool-full[\"`]|x-pollbal-[^\"`]*[\"`])")

// TestWireNamesDefinedOnce holds the module to one definition of each header name: no
// non-test Go file outside this package spells one as a literal (it uses this package's
// constant), and within this package each is written once.
func TestWireNamesDefinedOnce(t *testing.T) {
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(here)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	own := map[string][]string{} // literal, as written in this package → where
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		files++
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, loc := range wireName.FindAllIndex(data, -1) {
			lit := string(data[loc[0]:loc[1]])
			where := fmt.Sprintf("%s:%d", rel, 1+strings.Count(string(data[:loc[0]]), "\n"))
			if filepath.Dir(path) == here {
				own[lit] = append(own[lit], where)
				continue
			}
			t.Errorf("%s spells the protocol's header name %s: use the protocol package's constant", where, lit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read only %d non-test Go files under %s: the walk missed the module", files, root)
	}
	for _, want := range []string{HeaderLoad, HeaderFull, HeaderPrefix, HeaderSite, HeaderTimestamp,
		HeaderSignature, HeaderBackend, HeaderPool, HeaderReason} {
		if own[`"`+want+`"`] == nil {
			t.Errorf("the protocol package does not write %q as a literal; the pattern missed it", want)
		}
	}
	for lit, where := range own {
		if len(where) != 1 {
			t.Errorf("the protocol package writes %s %d times: %v", lit, len(where), where)
		}
	}
}

func TestWireNamePattern(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // "" = no match
	}{
		{name: "load header", src: `h.Set("X-Pool-Load", v)`, want: `"X-Pool-Load"`},
		{name: "full header, lower case", src: `h.Peek("x-pool-full")`, want: `"x-pool-full"`},
		{name: "an X-Pollbal name", src: `h.Get("X-Pollbal-Reason")`, want: `"X-Pollbal-Reason"`},
		{name: "the prefix alone", src: `p := "X-Pollbal-"`, want: `"X-Pollbal-"`},
		{name: "a raw string", src: "h.Get(`X-Pollbal-Site`)", want: "`X-Pollbal-Site`"},
		{name: "a name in a comment", src: `// sets X-Pollbal-Backend and X-Pool-Load`},
		{name: "a longer name", src: `h.Get("X-Pool-Loader")`},
		{name: "inside a message", src: `errors.New("missing X-Pollbal-Timestamp")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := wireName.FindString(tc.src); got != tc.want {
				t.Fatalf("match in %s = %q, want %q", tc.src, got, tc.want)
			}
		})
	}
}
