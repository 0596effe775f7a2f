package markdown

import "strings"

// FencedBlocks returns the bodies of the fenced code blocks with the given language in text, in
// order, with the indentation of their opening fence removed (blocks inside list items). A
// block that is never closed is not returned.
func FencedBlocks(text, lang string) []string {
	var blocks []string
	var cur *strings.Builder
	indent := ""
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```"+lang:
			cur = &strings.Builder{}
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}
