package testproc

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is an io.Writer that is safe for concurrent use, for a child's output or a logger's.
// The zero value is ready; it must not be copied after first use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Records decodes the lines written so far by a JSON slog handler and returns those whose
// message is msg, in order. A line that is not JSON fails the test.
func (b *Buffer) Records(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}
