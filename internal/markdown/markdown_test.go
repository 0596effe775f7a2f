package markdown

import (
	"slices"
	"testing"
)

func TestFencedBlocks(t *testing.T) {
	tests := []struct {
		name, text, lang string
		want             []string
	}{
		{"none", "# Title\n\nText.\n", "sh", nil},
		{"one", "Run:\n\n```sh\nmake demo\n```\n", "sh", []string{"make demo\n"}},
		{"only the language asked for", "```yaml\na: 1\n```\n```sh\nls\n```\n```yaml\nb: 2\n```\n", "yaml",
			[]string{"a: 1\n", "b: 2\n"}},
		{"a longer language is another", "```shell\nls\n```\n", "sh", nil},
		{"inside a list item", "1. Run:\n\n   ```sh\n   curl \\\n     -s x\n   ```\n", "sh",
			[]string{"curl \\\n  -s x\n"}},
		{"an empty block", "```console\n```\n", "console", []string{""}},
		{"never closed", "```sh\nls\n", "sh", nil},
		{"without a final newline", "```sh\nls\n```", "sh", []string{"ls\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FencedBlocks(tc.text, tc.lang); !slices.Equal(got, tc.want) {
				t.Errorf("FencedBlocks(%q, %q) = %q, want %q", tc.text, tc.lang, got, tc.want)
			}
		})
	}
}
