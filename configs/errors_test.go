package configs

import (
	"errors"
	"fmt"
	"testing"
)

// Issue 14: value errors had no line numbers while key errors did; every problem about a key
// that the file writes now names its line, and a problem about a key that is absent names none.
func TestParseProblemLines(t *testing.T) {
	tests := []problemCase{
		{name: "port out of range is a value error with the address's line",
			doc:  "site: test\nservices: {web: {}}\nbackends:\n  - address: 127.0.0.1:9001\n  - address: 127.0.0.1:99999\n",
			want: []string{`backends[1].address: port "99999" must be a number from 1 to 65535 (line 5)`}},
		{name: "a bad list element names its own line",
			doc:  "site: test\nservices: {web: {}}\napps:\n  - name: shop\n    hosts:\n      - shop.example.com\n      - Shop.Example.com:80\n",
			want: []string{`apps[0].hosts[1]: "shop.example.com:80": must not contain a port (the port in Host is ignored) (line 7)`}},
		{name: "a check across two keys names the key it is reported on",
			doc:  "site: test\nservices: {web: {}}\npoll:\n  interval: 1s\n  timeout: 2s\n",
			want: []string{"poll.timeout: must be less than poll.interval (1s) (line 5)"}},
		{name: "a value over its bound names its line",
			doc:  "site: test\nservices: {web: {}}\nproxy:\n  retries: 50\n",
			want: []string{"proxy.retries: must be <= 7 (got 50) (line 4)"}},
		{name: "an empty mapping written in the file",
			doc:  "site: test\nservices: {}\n",
			want: []string{"services: at least one service required (line 2)"}},
		{name: "an absent key has no line",
			doc:  "services: {web: {}}\n",
			want: []string{"site: required"}},
		{name: "a service name names the service's line",
			doc:  "site: test\nservices:\n  web: {}\n  \"bad name\": {}\n",
			want: []string{`services["bad name"]: service name must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63} (line 4)`}},
		{name: "an id the file does not write (it defaults to the address) has no line",
			doc: "site: test\nservices: {web: {}}\nbackends:\n  - address: 127.0.0.1:9001\n  - address: 127.0.0.1:9001\n",
			want: []string{
				`backends[1].id: "127.0.0.1:9001" is already used by backends[0]`,
				`backends[1].address: "127.0.0.1:9001" is already used by backends[0] (line 5)`}},
	}
	checkProblems(t, "", tests)
}

// Issue 14: a tab in the indentation was reported one line before the tab.
func TestParseTabIndentation(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{name: "tab before a key under a list item",
			doc:  "site: test\nservices:\n  web: {}\nbackends:\n  - address: 127.0.0.1:9001\n\tcapacity: 3\n",
			want: "parse config: line 6: a tab indents this line; YAML indents with spaces only"},
		{name: "tab before a key of a mapping",
			doc:  "site: test\nservices:\n\tweb: {}\n",
			want: "parse config: line 3: a tab indents this line; YAML indents with spaces only"},
		{name: "a whitespace-only line with a tab",
			doc:  "site: test\nservices:\n  web: {}\nbackends:\n  - address: 127.0.0.1:9001\n    capacity: 3\n\t\n",
			want: "parse config: line 7: a tab indents this line; YAML indents with spaces only"},
		{name: "a tab inside a value is not indentation",
			doc:  "site: test\nservices:\n  web:\n    warning_threshold:\t3\n",
			want: ""},
		{name: "other syntax errors keep yaml's message",
			doc:  "site: test\nservices: web: {}\n",
			want: "parse config: yaml: line 2: mapping values are not allowed in this context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Fatalf("error = %q, want %q", got, tt.want)
			}
			if tt.want != "" && len(Problems(err)) != 1 {
				t.Fatalf("Problems = %q, want one", Problems(err))
			}
		})
	}
}

// Issue 14: `address: http://127.0.0.1:9002` said "too many colons" without a hint.
func TestCheckAddressHints(t *testing.T) {
	tests := []struct {
		name string
		addr string
		want string
	}{
		{name: "http scheme", addr: "http://127.0.0.1:9002",
			want: `"http://127.0.0.1:9002" is a URL: drop "http://" and any path (want host:port, e.g. 127.0.0.1:9002)`},
		{name: "https scheme with a path", addr: "https://web-1.example.com:8443/app",
			want: `"https://web-1.example.com:8443/app" is a URL: drop "https://" and any path (want host:port, e.g. web-1.example.com:8443)`},
		{name: "scheme and nothing else", addr: "http://",
			want: `"http://" is a URL: want host:port`},
		{name: "a path", addr: "127.0.0.1:9002/pool",
			want: `"127.0.0.1:9002/pool" has a path: drop it (want host:port, e.g. 127.0.0.1:9002)`},
		{name: "missing port keeps its short message", addr: "127.0.0.1", want: "missing port"},
		{name: "valid", addr: "127.0.0.1:9002", want: ""},
		{name: "valid IPv6", addr: "[::1]:9002", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := checkAddress(tt.addr, false); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Fatalf("checkAddress(%q) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

// Issue 14: `localhost:9001` and `127.0.0.1:9001` as two backends were accepted silently.
func TestParseSameBackendTwice(t *testing.T) {
	tests := []struct {
		name   string
		first  string
		second string
		want   []string
	}{
		{name: "localhost and 127.0.0.1", first: "127.0.0.1:9001", second: "localhost:9001",
			want: []string{`backends[1].address: "localhost:9001" is the same host:port as backends[0] ("127.0.0.1:9001") (line 7)`}},
		{name: "host name case", first: "web-1.example.com:80", second: "WEB-1.example.com:80",
			want: []string{`backends[1].address: "WEB-1.example.com:80" is the same host:port as backends[0] ("web-1.example.com:80") (line 7)`}},
		{name: "leading zero in the port", first: "127.0.0.1:9001", second: "127.0.0.1:09001",
			want: []string{`backends[1].address: "127.0.0.1:09001" is the same host:port as backends[0] ("127.0.0.1:9001") (line 7)`}},
		{name: "IPv4-mapped IPv6", first: "10.0.0.5:80", second: "[::ffff:10.0.0.5]:80",
			want: []string{`backends[1].address: "[::ffff:10.0.0.5]:80" is the same host:port as backends[0] ("10.0.0.5:80") (line 7)`}},
		{name: "the same spelling", first: "127.0.0.1:9001", second: "127.0.0.1:9001",
			want: []string{`backends[1].address: "127.0.0.1:9001" is already used by backends[0] (line 7)`}},
		{name: "different ports", first: "localhost:9001", second: "127.0.0.1:9002"},
		{name: "different hosts", first: "127.0.0.1:9001", second: "127.0.0.2:9001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := fmt.Sprintf("site: test\nservices: {web: {}}\nbackends:\n  - id: a\n    address: %q\n  - id: b\n    address: %q\n", tt.first, tt.second)
			_, err := Parse([]byte(doc))
			wantProblems(t, err, tt.want...)
		})
	}
}

func TestProblemsSplitsJoinedErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{name: "errors.Join gives one item per error",
			err:  errors.Join(errors.New("listen: changing a to b needs a restart"), errors.New("site: changing x to y needs a restart")),
			want: []string{"listen: changing a to b needs a restart", "site: changing x to y needs a restart"}},
		{name: "wrapped join",
			err:  fmt.Errorf("reload: %w", errors.Join(errors.New("a"), errors.New("b"))),
			want: []string{"a", "b"}},
		{name: "a plain error is one item", err: errors.New("a"), want: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblems(t, tt.err, tt.want...)
		})
	}
}

// Issue 28: yaml.v3 names the line before the true one for the errors of its parser (an
// unclosed `[` on line 6 was reported at line 5), and no line when that is the first.
func TestParseSyntaxErrorLines(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{name: "unclosed flow list before the next key (the issue's case)",
			doc:  "site: test\nservices:\n  web: {}\napps:\n  - name: shop\n    hosts: [\"*\"\nbackends: []\n",
			want: "yaml: line 6: did not find expected ',' or ']'"},
		{name: "unclosed flow list on the last line",
			doc:  "site: test\nservices:\n  web: {}\napps:\n  - name: shop\n    hosts: [\"*\"\n",
			want: "yaml: line 6: did not find expected ',' or ']'"},
		{name: "unclosed flow list on the first line",
			doc:  "listen: [a, b\n\n\nadmin: {}\n",
			want: "yaml: line 1: did not find expected ',' or ']'"},
		{name: "unclosed flow mapping",
			doc:  "site: test\nservices: {web: {}\napps: []\n",
			want: "yaml: line 2: did not find expected ',' or '}'"},
		{name: "a list item where a key belongs",
			doc:  "site: test\nservices:\n  web: {}\n - x\n",
			want: "yaml: line 4: did not find expected key"},
		{name: "a list item in a nested mapping (yaml names where that mapping began)",
			doc:  "site: test\nservices:\n  web: {}\n  api: {}\n  - x\n",
			want: "yaml: line 5: did not find expected key"},
		{name: "a list item in a nested mapping after a flow list over three lines",
			doc:  "site: test\napps:\n  - name: shop\n    hosts: [a.example,\n      b.example,\n      c.example]\n    service: web\n    - x\n",
			want: "yaml: line 8: did not find expected key"},
		{name: "an unclosed flow list over several lines",
			doc:  "site: test\napps:\n  - name: shop\n    hosts: [a.example,\n      b.example\nbackends: []\n",
			want: "yaml: line 4: did not find expected ',' or ']'"},
		{name: "a flow list cut by a block list",
			doc:  "site: test\napps:\n  - name: x\n    hosts: [\"*\",\n  - name: y\n",
			want: "yaml: line 5: did not find expected node content"},
		{name: "a stray bracket on the first line (yaml names no line)",
			doc:  "site: [a]]\n",
			want: "yaml: line 1: did not find expected key"},
		{name: "a scanner error keeps yaml's line, which is right",
			doc:  "site: test\nlisten: \"127.0.0.1:80\nadmin: {}\n",
			want: "yaml: line 2: found unexpected end of stream"},
		{name: "a key without a colon (scanner)",
			doc:  "site: test\nservices:\n  web: {}\n  bad\napps: []\n",
			want: "yaml: line 4: could not find expected ':'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), "parse config: "+tt.want; got != want {
				t.Fatalf("error = %q, want %q", got, want)
			}
		})
	}
}
