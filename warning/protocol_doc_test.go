package warning

import (
	"os"
	"regexp"
	"testing"
)

// TestProtocolDocSignatureExample recomputes the worked example of docs/protocol.md with the
// code that signs real warnings, so the document a backend author follows cannot drift from it.
func TestProtocolDocSignatureExample(t *testing.T) {
	data, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
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

	g := Group{Pool: "default", Service: "web", Version: "v41", Threshold: 2,
		Serving: []string{"web-1", "web-2"}, Leaving: []string{"web-3"}}
	if got := Body(g, "eu-west-1"); got != line {
		t.Errorf("the example body is %q, but pollbal would send %q for that group", line, got)
	}
	// The sender signs the body as sent: the line and its newline.
	if got := Signature([]byte(secret), timestamp, line+"\n"); got != signature {
		t.Errorf("the example signature is %s, but pollbal computes %s", signature, got)
	}
}
