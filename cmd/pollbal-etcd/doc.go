// Command pollbal-etcd runs a single-member etcd server on 127.0.0.1, for trying pollbal's
// shared admin moves (docs/fleet.md, "Sharing moves across instances") on a machine without etcd. It
// is the etcd server the tests embed (go.etcd.io/etcd/server/v3), so it needs nothing but Go:
// `make build` builds it as bin/pollbal-etcd. It binds loopback addresses only, keeps no
// authentication and is not for production; it is not part of a release.
package main
