// Package certs loads the TLS certificates of the configuration, checks them (readable, key
// matching its certificate, not expired), picks the one to serve by SNI, and holds the set
// that the TLS listener serves so that a reload can replace it at once.
package certs
