// Command demo is `make demo`: it starts four example backends and one pollbal on the shipped
// demo configuration, sends a light stream of client requests through pollbal, runs the real
// scripts/pollbal-update.sh on every backend at once, shows the rolling update live, and ends
// with a summary whose exit status says whether the update kept every request served, moved
// every backend to the new version and kept each pool at or above its warning threshold.
//
// Everything runs as child processes on 127.0.0.1 under a temporary directory; each child has
// its own process group and a parent-death signal, and all of them are stopped, and the
// directory removed, before the demo exits.
package main
