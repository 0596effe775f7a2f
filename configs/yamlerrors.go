package configs

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The messages inside a *yaml.TypeError name a line and Go types; addTypeErrors rewrites the
// ones it knows into `path: problem (line N)`.
var (
	// The Go types they name are rawType's, spelt out as struct { ... }.
	unknownFieldRe = regexp.MustCompile(`(?s)^line (\d+): field (.+) not found in type .+$`)
	fieldSetRe     = regexp.MustCompile(`(?s)^line (\d+): field (.+) already set in type .+$`)
	duplicateKeyRe = regexp.MustCompile(`(?s)^line (\d+): mapping key "(.*)" already defined at line (\d+)$`)
	cannotDecodeRe = regexp.MustCompile(`(?s)^line (\d+): cannot unmarshal (\S+)(?: .*)? into (.+)$`)
)

// addTypeErrors records each message of err as a problem, with the path of the key it is
// about when the document shows one at that line. It reports whether yaml.v3 dropped a whole
// mapping (it does on a duplicate key, and a top level that is not a mapping drops everything):
// then the decoded values are too incomplete to validate.
func addTypeErrors(p *problemList, data []byte, err *yaml.TypeError) (dropped bool) {
	idx := indexDocument(data)
	for _, msg := range err.Errors {
		p.errs = append(p.errs, rewriteTypeError(idx, msg))
		topLevel := cannotDecodeRe.MatchString(msg) && strings.HasSuffix(msg, " into "+rawConfigType.String())
		if duplicateKeyRe.MatchString(msg) || topLevel {
			dropped = true
		}
	}
	return dropped
}

func rewriteTypeError(idx *docIndex, msg string) error {
	at := func(path, format string, args ...any) error {
		return &problem{path: path, err: fmt.Errorf(format, args...)}
	}
	if m := unknownFieldRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if path, ok := idx.key(line, m[2]); ok {
			return at(path, "unknown key (line %d)", line)
		}
		return fmt.Errorf("line %d: unknown key %q", line, m[2])
	}
	if m := fieldSetRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if path, ok := idx.key(line, m[2]); ok {
			return at(path, "key written twice (line %d)", line)
		}
		return fmt.Errorf("line %d: key %q written twice", line, m[2])
	}
	if m := duplicateKeyRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if path, ok := idx.key(line, m[2]); ok {
			return at(path, "key written twice (lines %s and %d)", m[3], line)
		}
		return fmt.Errorf("line %d: key %q written twice (first at line %s)", line, m[2], m[3])
	}
	if m := cannotDecodeRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		want := describeGoType(m[3])
		got := describeTag(m[2])
		if path, ok := idx.value(line, m[2]); ok {
			return &problem{path: path, err: fmt.Errorf("must be %s, got %s (line %d)", want, got, line), unusable: true}
		}
		return fmt.Errorf("line %d: must be %s, got %s", line, want, got)
	}
	return errors.New(msg)
}

// describeGoType names what a raw Go type expects, in YAML words.
func describeGoType(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "struct "):
		return "a mapping"
	case t == "string":
		return "a string"
	}
	return t
}

// docIndex maps lines of a document to the paths of the keys and values on them.
type docIndex struct {
	keys   []indexEntry // mapping keys: text is the key
	values []indexEntry // values: text is the short tag
}

type indexEntry struct {
	line int
	text string
	path string
}

// indexDocument parses the first document of data into nodes and indexes them; on any failure
// the index is empty and messages keep their line only.
func indexDocument(data []byte) (idx *docIndex) {
	idx = &docIndex{}
	defer func() {
		if recover() != nil {
			idx = &docIndex{}
		}
	}()
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return idx
	}
	idx.walk(&root, "")
	return idx
}

func (idx *docIndex) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			idx.walk(c, path)
		}
		return
	case yaml.AliasNode:
		// Not followed: an alias's target is indexed where it is written.
		return
	}
	idx.values = append(idx.values, indexEntry{line: n.Line, text: n.ShortTag(), path: path})
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := joinPath(path, k.Value)
			idx.keys = append(idx.keys, indexEntry{line: k.Line, text: k.Value, path: child})
			idx.walk(v, child)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			idx.walk(c, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

func joinPath(path, key string) string {
	if path == "services" {
		// The keys under services are service names.
		return servicePath(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func (idx *docIndex) key(line int, name string) (string, bool) {
	for _, e := range idx.keys {
		if e.line == line && e.text == name {
			return e.path, true
		}
	}
	return "", false
}

func (idx *docIndex) value(line int, tag string) (string, bool) {
	for _, e := range idx.values {
		if e.line == line && e.text == tag {
			if e.path == "" {
				return "top level", true
			}
			return e.path, true
		}
	}
	return "", false
}

// locate returns err with the line of the key it is about, when err is a problem at a path
// that the document writes (validation works on values, which have forgotten their lines).
func (idx *docIndex) locate(err error) error {
	var p *problem
	if !errors.As(err, &p) || p.line > 0 {
		return err
	}
	line := idx.line(p.path)
	if line == 0 {
		return err
	}
	located := *p
	located.line = line
	return &located
}

// empty reports whether the document writes the key at path with no value (or null), and the
// key's line.
func (idx *docIndex) empty(path string) (int, bool) {
	for _, e := range idx.values {
		if e.path == path && e.text == "!!null" {
			return idx.line(path), true
		}
	}
	return 0, false
}

// line returns the line of the key at path, or of the list element at path; 0 if the
// document does not write it.
func (idx *docIndex) line(path string) int {
	for _, e := range idx.keys {
		if e.path == path {
			return e.line
		}
	}
	for _, e := range idx.values {
		if e.path == path {
			return e.line
		}
	}
	return 0
}

// yamlLineRe finds the line yaml.v3 puts in a syntax error.
var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// tabError is a syntax error caused by a tab in a line's indentation.
type tabError struct {
	line int
	err  error // yaml's own error, which names a line nearby
}

func (e *tabError) Error() string {
	return fmt.Sprintf("line %d: a tab indents this line; YAML indents with spaces only", e.line)
}

func (e *tabError) Unwrap() error { return e.err }

// syntaxError names the right line for the syntax error yaml.v3 reports on a tab in the
// indentation: yaml.v3 gives the line where the enclosing block started, often the line
// before. Other errors are returned unchanged.
func syntaxError(data []byte, err error) error {
	m := yamlLineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	line := tabIndentedLine(data, reported)
	switch {
	case line == 0:
		return err
	case strings.Contains(m[2], "tab character"):
		return &tabError{line: line, err: err}
	case strings.Contains(m[2], "cannot start any token") && line == reported:
		// A tab where a key should start: yaml names the right line but not the cause.
		return &tabError{line: line, err: err}
	}
	return err
}

// tabIndentedLine returns the first line at or after from (1-based) whose indentation holds a
// tab; 0 if there is none.
func tabIndentedLine(data []byte, from int) int {
	for i, line := range strings.Split(string(data), "\n") {
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if i+1 >= from && strings.Contains(indent, "\t") {
			return i + 1
		}
	}
	return 0
}
