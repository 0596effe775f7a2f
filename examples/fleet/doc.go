// Package fleet holds a configuration pair (a.yaml and b.yaml) for two pollbal instances that
// share one set of admin moves through etcd; its test loads both so the example can never rot.
package fleet
