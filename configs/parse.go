package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"

	"gopkg.in/yaml.v3"
)

// Load reads the file at path and returns its configuration like Parse. Only a regular file
// of at most MaxFileSize bytes is read (see readFile).
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes one YAML document strictly (an unknown key is an error), applies the defaults
// (defaults.go, documented in pollbal.yaml) and validates the result. The error lists every problem found, each prefixed with
// its path (see Problems); broken YAML and a second document are errors on their own. The
// returned Config is valid and must be treated as read-only.
func Parse(data []byte) (*Config, error) {
	raw := reflect.New(rawConfigType)
	var p problemList
	dropped := false
	if err := decodeStrict(data, raw.Interface()); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) {
			return nil, fmt.Errorf("parse config: %w", syntaxError(data, err))
		}
		// The rest of the document was still decoded: report these with everything else.
		dropped = addTypeErrors(&p, data, typeErr)
	}
	c := config(raw.Elem(), &p)
	if c.Admin.Store.Etcd == nil {
		// yaml.v3 reads an empty key as absent; here that would silently mean "no store".
		if line, ok := indexDocument(data).empty("admin.store.etcd"); ok {
			p.errs = append(p.errs, &problem{path: "admin.store.etcd", line: line,
				err: errors.New("is empty: list its endpoints, or remove the key to keep admin moves in this instance only")})
		}
	}
	if dropped {
		// Validating what is left would only add noise such as "site: required".
		return nil, p.err()
	}
	if err := c.Validate(); err != nil {
		idx := indexDocument(data)
		for _, e := range unrelated(rawProblems(err), p.errs) {
			p.errs = append(p.errs, idx.locate(e))
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// errMultipleDocuments rejects a file with a second YAML document, which would otherwise be
// ignored without a word.
var errMultipleDocuments = errors.New("the file holds more than one YAML document; want exactly one")

// decodeStrict decodes the first document of data into out with KnownFields(true) and
// rejects any further document. An empty input (or only comments) decodes to nothing. A
// *yaml.TypeError means the document was decoded except for the keys it names.
func decodeStrict(data []byte, out any) (err error) {
	// yaml.v3 has panicked on hostile input before; a config loader must answer with an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml decoder failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err = dec.Decode(out)
	if errors.Is(err, io.EOF) {
		return nil
	}
	var typeErr *yaml.TypeError
	if err != nil && !errors.As(err, &typeErr) {
		return err
	}
	var next yaml.Node
	switch nextErr := dec.Decode(&next); {
	case nextErr == nil:
		return errMultipleDocuments
	case !errors.Is(nextErr, io.EOF):
		// One problem, not two: the second document is what is wrong, whatever else it holds.
		return fmt.Errorf("%w: %v", errMultipleDocuments, syntaxError(data, nextErr))
	}
	return err
}

// unrelated returns the validation problems that are not about a path that already failed to
// decode: a key whose value was unusable keeps its default (or nothing), and "site: required"
// after "site: must be a string" would only be noise.
func unrelated(validation, decoding []error) []error {
	var out []error
next:
	for _, v := range validation {
		var vp *problem
		if errors.As(v, &vp) {
			for _, d := range decoding {
				var dp *problem
				if errors.As(d, &dp) && dp.unusable && related(vp.path, dp.path) {
					continue next
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// rawProblems returns the errors inside a problem list from Validate, or err itself.
func rawProblems(err error) []error {
	var list interface{ WrappedErrors() []error }
	if errors.As(err, &list) {
		return list.WrappedErrors()
	}
	return []error{err}
}
