package configs

import (
	"regexp"

	"pollbal/protocol"
)

// Name grammars of the configuration.
var (
	// tokenRe: site, service names and backend ids, in the protocol's service grammar (a site
	// and a service name are sent in warning bodies).
	tokenRe = regexp.MustCompile(`^` + tokenGrammar + `$`)
	// poolRe: node pool and app names.
	poolRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	// labelRe: one label of a host name (lower-cased); "_" is tolerated as in real DNS.
	labelRe = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`)
)

// Grammars as shown in messages.
const (
	tokenGrammar = protocol.ServiceGrammar
	poolGrammar  = `[a-z0-9][a-z0-9_.-]{0,62}`
)

// ValidPoolName reports whether s is a well-formed node pool name. The reserved names
// "default" and "unassigned" are well-formed; whether a given user may name them is the
// caller's rule.
func ValidPoolName(s string) bool { return poolRe.MatchString(s) }

// ValidServiceName reports whether s is a well-formed service name, which is also the grammar
// of the site and of backend ids.
func ValidServiceName(s string) bool { return tokenRe.MatchString(s) }
