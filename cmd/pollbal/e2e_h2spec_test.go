package main

// h2spec (github.com/summerwind/h2spec) against pollbal's TLS listener: every case passes but
// the exceptions docs/http2.md lists, each with why. Run by `make h2spec`; skipped when h2spec
// is not installed (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible).

import (
	"encoding/xml"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// h2specExceptions are the h2spec cases pollbal fails, by package and case name; docs/http2.md
// names each package and says why.
var h2specExceptions = map[string]bool{
	"http2/6.5.3: Sends multiple values of SETTINGS_INITIAL_WINDOW_SIZE": true,
}

// h2specReport is the part of h2spec's JUnit report the test reads.
type h2specReport struct {
	Suites []struct {
		Cases []struct {
			Package string    `xml:"package,attr"`
			Name    string    `xml:"classname,attr"`
			Failure *struct{} `xml:"failure"`
			Error   *struct{} `xml:"error"` // what h2spec writes for a failed case
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestH2Spec(t *testing.T) {
	bin, err := exec.LookPath("h2spec")
	if err != nil {
		t.Skip("h2spec is not installed: go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible")
	}
	s := startH2Setup(t)
	_, port, err := net.SplitHostPort(s.tlsAddr)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "h2spec.xml")
	out, err := exec.Command(bin, "-t", "-k", "-h", "127.0.0.1", "-p", port, "-o", "5", "-j", report).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("h2spec: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("h2spec wrote no report: %v\n%s", err, out)
	}
	var rep h2specReport
	if err := xml.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../../docs/http2.md")
	if err != nil {
		t.Fatal(err)
	}
	cases, failed := 0, map[string]bool{}
	for _, suite := range rep.Suites {
		for _, c := range suite.Cases {
			cases++
			if c.Failure != nil || c.Error != nil || c.Skipped != nil {
				failed[c.Package+": "+c.Name] = true
			}
		}
	}
	if cases < 100 {
		t.Fatalf("h2spec ran %d cases, want the whole suite\n%s", cases, out)
	}
	var unexpected []string
	for name := range failed {
		if !h2specExceptions[name] {
			unexpected = append(unexpected, name)
		}
	}
	sort.Strings(unexpected)
	for _, name := range unexpected {
		t.Errorf("h2spec failed: %s", name)
	}
	for name := range h2specExceptions {
		if !failed[name] {
			t.Errorf("listed as an exception but passes now (drop it here and in docs/http2.md): %s", name)
		}
		if pkg, _, _ := strings.Cut(name, ":"); !strings.Contains(string(docs), "`"+pkg+"`") {
			t.Errorf("docs/http2.md does not explain the exception %s", name)
		}
	}
	t.Logf("h2spec: %d cases, %d failed (%d listed exceptions)", cases, len(failed), len(h2specExceptions))
	if t.Failed() {
		t.Logf("h2spec output:\n%s", out)
	}
}
