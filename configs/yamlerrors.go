package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
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
		e, ok := idx.keyEntry(line, m[2])
		if !ok {
			return fmt.Errorf("line %d: unknown key %q", line, m[2])
		}
		if near, ok := nearestKey(m[2], e.known); ok {
			return at(e.path, "unknown key (line %d): did you mean %s?", line, near)
		}
		return at(e.path, "unknown key (line %d)", line)
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
	// known lists, for a key, every key that the mapping holding it may have: nil where the
	// keys are names (services) or the mapping is not part of the configuration.
	known []string
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
	idx.walk(&root, "", reflect.TypeFor[Config]())
	return idx
}

// walk indexes n, the node at path, whose Config type is t (nil where the document goes
// beyond the configuration, as an unknown key does).
func (idx *docIndex) walk(n *yaml.Node, path string, t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			idx.walk(c, path, t)
		}
		return
	case yaml.AliasNode:
		// Not followed: an alias's target is indexed where it is written.
		return
	}
	idx.values = append(idx.values, indexEntry{line: n.Line, text: n.ShortTag(), path: path})
	switch n.Kind {
	case yaml.MappingNode:
		known := mappingKeys(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := joinPath(path, k.Value)
			idx.keys = append(idx.keys, indexEntry{line: k.Line, text: k.Value, path: child, known: known})
			idx.walk(v, child, childType(t, k.Value))
		}
	case yaml.SequenceNode:
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		for i, c := range n.Content {
			idx.walk(c, fmt.Sprintf("%s[%d]", path, i), elem)
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
	e, ok := idx.keyEntry(line, name)
	return e.path, ok
}

func (idx *docIndex) keyEntry(line int, name string) (indexEntry, bool) {
	for _, e := range idx.keys {
		if e.line == line && e.text == name {
			return e, true
		}
	}
	return indexEntry{}, false
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

// yamlLineRe finds the line yaml.v3 puts in a syntax error; yamlNoLineRe matches one without.
var (
	yamlLineRe   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	yamlNoLineRe = regexp.MustCompile(`^yaml: (.*)$`)
)

// parserProblems are the problems that yaml.v3's parser reports, as opposed to its scanner.
// For those it names the 0-based line of a mark as if it were 1-based (its decoder adds one
// for scanner errors only): the mark is where the collection or node being parsed began (an
// unclosed `[` or `{`, a block mapping), or the token it found instead when there is no such
// mark or that mark is on the first line; and a mark on the first line gives no line at all.
// parserErrorLine finds the true line.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// blockProblems are the parser's problems whose mark is the start of the block collection
// that could not go on: the line that stops it is further down.
var blockProblems = map[string]bool{
	"did not find expected key":           true,
	"did not find expected '-' indicator": true,
}

// parserErrorLine returns the 1-based line of the parser error in data with the given
// problem. It parses data again after one blank line: that moves every mark one line down, so
// the 0-based line yaml.v3 names is the mark's true 1-based line, and no mark of the document
// is on the first line any more (so yaml.v3 names the mark it should, and always one). For a
// block collection that mark is where it began; the line is then the first one from there on
// that makes the document fail (stopsBlockAt). A mark at the end of the file (an unclosed `[`
// on the last line) is on the line after the last; the last line is named instead.
func parserErrorLine(data []byte, problem string) (int, bool) {
	line, got := parseProblem(append([]byte("\n"), data...))
	if line == 0 || got != problem {
		return 0, false
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if n := bytes.Count(data, []byte("\n")); line > n {
		line = max(1, n)
	}
	if blockProblems[problem] {
		if at, ok := stopsBlockAt(lines, line, problem); ok {
			line = at
		}
	}
	return line, true
}

// stopsBlockAt returns the first line at or after from whose first lines alone fail to parse
// with problem. Cutting a block collection short leaves it valid, so the lines before the one
// that stops it parse, and every longer cut fails as the whole does.
func stopsBlockAt(lines [][]byte, from int, problem string) (int, bool) {
	fails := func(n int) bool {
		_, got := parseProblem(bytes.Join(lines[:n], nil))
		return got == problem
	}
	if from < 1 || from > len(lines) || !fails(len(lines)) {
		return 0, false
	}
	lo, hi := from, len(lines) // fails(hi) holds
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// parseProblem parses every document of data and returns the line and problem of the first
// syntax error (0 and "" when there is none, or it names no line).
func parseProblem(data []byte) (line int, problem string) {
	defer func() {
		if recover() != nil {
			line, problem = 0, ""
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return 0, ""
		}
		m := yamlLineRe.FindStringSubmatch(err.Error())
		if m == nil {
			return 0, ""
		}
		line, _ = strconv.Atoi(m[1])
		return line, m[2]
	}
}

// lineError is a syntax error with its line corrected.
type lineError struct {
	line    int
	problem string
	err     error // yaml's own error
}

func (e *lineError) Error() string { return fmt.Sprintf("yaml: line %d: %s", e.line, e.problem) }

func (e *lineError) Unwrap() error { return e.err }

// tabError is a syntax error caused by a tab in a line's indentation.
type tabError struct {
	line int
	err  error // yaml's own error, which names a line nearby
}

func (e *tabError) Error() string {
	return fmt.Sprintf("line %d: a tab indents this line; YAML indents with spaces only", e.line)
}

func (e *tabError) Unwrap() error { return e.err }

// syntaxError returns yaml.v3's syntax error err with the right line: for a tab in the
// indentation, yaml.v3 gives the line where the enclosing block started, often the line
// before, and does not name the cause; for the parser's problems it names the line before
// (see parserProblems). Other errors are returned unchanged.
func syntaxError(data []byte, err error) error {
	m := yamlLineRe.FindStringSubmatch(err.Error())
	if m == nil {
		if m := yamlNoLineRe.FindStringSubmatch(err.Error()); m != nil && parserProblems[m[1]] {
			if line, ok := parserErrorLine(data, m[1]); ok {
				return &lineError{line: line, problem: m[1], err: err}
			}
		}
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	line := tabIndentedLine(data, reported)
	switch {
	case line != 0 && strings.Contains(m[2], "tab character"):
		return &tabError{line: line, err: err}
	case line != 0 && strings.Contains(m[2], "cannot start any token") && line == reported:
		// A tab where a key should start: yaml names the right line but not the cause.
		return &tabError{line: line, err: err}
	case parserProblems[m[2]]:
		if line, ok := parserErrorLine(data, m[2]); ok {
			return &lineError{line: line, problem: m[2], err: err}
		}
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
