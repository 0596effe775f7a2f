// Package twosite holds a two-site example configuration pair (eu.yaml and us.yaml); its test
// loads both so the example can never rot.
package twosite
