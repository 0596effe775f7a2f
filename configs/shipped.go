package configs

import "embed"

// shippedFiles holds the YAML files shipped beside the code; an embed.FS is read-only.
//
//go:embed *.yaml
var shippedFiles embed.FS

// Shipped returns the configuration files shipped in this directory (pollbal.yaml, the
// commented reference; demo.yaml, the `make demo` setup), by file name. The map and the byte
// slices are new on every call and belong to the caller.
func Shipped() map[string][]byte {
	entries, err := shippedFiles.ReadDir(".")
	if err != nil {
		// The embedded directory always exists; nothing to report.
		return map[string][]byte{}
	}
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		data, err := shippedFiles.ReadFile(e.Name())
		if err != nil {
			continue
		}
		out[e.Name()] = data
	}
	return out
}
