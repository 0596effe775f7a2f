package configs

import (
	"testing"
)

// FuzzParse checks that Parse never panics, that every rejection explains itself, and that an
// accepted configuration is valid again when revalidated (defaults never produce an invalid
// value). Run it with: go test ./configs -run '^$' -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	for _, data := range Shipped() {
		f.Add(data)
	}
	for _, seed := range []string{
		"",
		baseYAML,
		baseYAML + "---\n" + baseYAML,
		"site: [test\n",
		"- a\n",
		"site: a\nsite: b\n",
		"site: test\nservices: {web: 2}\napps: {a: 1}\n",
		"site: test\nservices:\n  web:\napps:\n  - name: shop\n    hosts: [\"*\", \"*\"]\nbackends:\n  - address: 127.0.0.1\n    capacity: 0\n",
		"poll:\n  interval: 5x\n  fall: 1.5\n  rise: \"2\"\n",
		"a: &a [*a]\n",
		"site: &s test\nlisten: *s\n",
		"services: {\"\": {}}\napps: [{hosts: [\"\"]}]\nbackends: [{}]\n",
		"alarms:\n  webhook: \"http://[::1\"\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Errorf("Parse returned a config with error %v", err)
			}
			if len(Problems(err)) == 0 {
				t.Errorf("Problems(%v) is empty", err)
			}
			return
		}
		if c == nil {
			t.Fatal("Parse returned neither a config nor an error")
		}
		if err := c.Validate(); err != nil {
			t.Errorf("accepted config fails Validate: %v", err)
		}
	})
}
