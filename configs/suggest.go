package configs

import (
	"reflect"
	"strings"
)

// mappingKeys returns the keys a mapping of Config type t may have, in declaration order: its
// fields' yaml names for a struct, nil for a map (its keys are names) or an unknown type.
func mappingKeys(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			keys = append(keys, name)
		}
	}
	return keys
}

// childType returns the Config type of the value under key in a mapping of type t; nil when
// t has no such key.
func childType(t reflect.Type, key string) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); yamlName(f) == key {
				return f.Type
			}
		}
	}
	return nil
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// nearestKey returns the one key of known that word is most likely a misspelling of: at an
// edit distance (insertions, deletions, substitutions and swaps of two neighbours) of at most
// 2, and of at most a third of the word's length, so that a short or unrelated word gets no
// suggestion. Two keys at the same distance suggest neither.
func nearestKey(word string, known []string) (string, bool) {
	limit := min(2, len(word)/3)
	best, bestDist, tied := "", limit+1, false
	for _, k := range known {
		d := editDistance(strings.ToLower(word), k)
		switch {
		case d < bestDist:
			best, bestDist, tied = k, d, false
		case d == bestDist:
			tied = true
		}
	}
	if best == "" || tied {
		return "", false
	}
	return best, true
}

// editDistance is the optimal string alignment distance between a and b (Damerau–Levenshtein
// without editing a substring twice), over bytes: the keys are ASCII.
func editDistance(a, b string) int {
	// Three rows: the one before the previous (for swaps), the previous, the current.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
