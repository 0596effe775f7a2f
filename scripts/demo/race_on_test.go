//go:build race

package main

// raceEnabled builds the demo under test with -race when the tests run with -race.
const raceEnabled = true
