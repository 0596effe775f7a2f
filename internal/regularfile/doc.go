// Package regularfile reads the files pollbal reads at start and on every reload (the
// configuration, secrets, TLS certificates and keys, the etcd CA, the moves state file), and
// only when each is a regular file of bounded size: a named pipe would block the reader until
// someone writes into it, and a device such as /dev/zero never ends.
package regularfile
