// Package testproc is the tests' one way to run child processes and wait on them: Start runs a
// program on 127.0.0.1-only tests' terms (output kept for failure messages, the process ended at
// cleanup and when the test binary dies), StartServer runs a server and returns the address it
// prints, WaitFor is the bounded poll that stands in for time.Sleep, Workers runs a concurrency
// test's load until told to stop, FreeAddr picks a free 127.0.0.1 port, Serve and ServeLocal run
// a scripted peer on a raw socket, and GoBuild builds a command under test.
//
// It is imported only by _test.go files.
package testproc
