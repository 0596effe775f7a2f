package protocol

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

func readProtocolDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestProtocolDocSignatureExample recomputes the worked example of docs/protocol.md with the
// code that writes and signs real warnings, so the document a backend author follows cannot
// drift from it.
func TestProtocolDocSignatureExample(t *testing.T) {
	doc := readProtocolDoc(t)
	find := func(what, pattern string) string {
		t.Helper()
		m := regexp.MustCompile(pattern).FindStringSubmatch(doc)
		if m == nil {
			t.Fatalf("docs/protocol.md: no %s (pattern %s)", what, pattern)
		}
		return m[1]
	}
	secret := find("secret", "with the secret `([^`]+)`")
	timestamp := find("timestamp", "\\| `X-Pollbal-Timestamp` \\| `([0-9]+)` \\|")
	line := find("body", "\\| body \\| `([^`]+)` and a newline \\|")
	signature := find("signature", "\\| `X-Pollbal-Signature` \\| `(sha256=[0-9a-f]{64})` \\|")

	w := Warning{Service: "web", Version: "v41", Serving: 2, Leaving: 1, Threshold: 2, Site: "eu-west-1"}
	if got := w.Line(); got != line {
		t.Errorf("the example body is %q, but pollbal would send %q for that group", line, got)
	}
	// The body is signed as sent: the line and its newline.
	if got := Sign([]byte(secret), timestamp, []byte(w.Body())); got != signature {
		t.Errorf("the example signature is %s, but pollbal computes %s", signature, got)
	}
	if got, err := ParseWarning([]byte(line + "\n")); err != nil || got != w {
		t.Errorf("ParseWarning(the example body) = %+v, %v; want %+v", got, err, w)
	}
}

// TestProtocolDocGrammar checks that the name grammars docs/protocol.md gives for a /pool
// answer are the ones the parser applies, and that it states the line limit the parser applies.
func TestProtocolDocGrammar(t *testing.T) {
	doc := readProtocolDoc(t)
	for _, want := range []string{
		"service = " + ServiceGrammar + "\n",
		"version = " + VersionGrammar + "\n",
		fmt.Sprintf("at most %d lines", MaxPoolLines),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/protocol.md does not contain %q", want)
		}
	}
}
