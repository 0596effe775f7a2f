// Package markdown reads what the documentation tests check in Markdown text: the bodies of
// fenced code blocks of one language.
//
// It is imported only by _test.go files.
package markdown
