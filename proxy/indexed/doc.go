// Package indexed keeps a set of pointers in a slice where each element knows its own
// position. A scanner's set of connections (the client listener's, the backend watchdog's)
// takes an element in and out in O(1).
package indexed
