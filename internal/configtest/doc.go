// Package configtest builds the configurations that tests hand to components: one builder
// shared by every package's tests, starting from the defaults the YAML would get.
//
// It is imported only by _test.go files.
package configtest
