//go:build !linux

package main

// keepSysmonAwake does nothing here: the re-exec needs /proc/self/exe.
func keepSysmonAwake() {}
