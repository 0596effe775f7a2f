// Command sockethold holds listening sockets and runs a program on them the way systemd runs a
// socket-activated service, for bench/upgrade.sh's restarts: what `systemctl restart` does with
// pollbal.socket and pollbal-admin.socket, without systemd.
//
//	sockethold -listen proxy=127.0.0.1:18380 -listen admin=127.0.0.1:18390 -- pollbal run -config FILE
//
// It binds each address (loopback only), then starts the program with the sockets as
// descriptors 3, 4, ... in the order given, LISTEN_FDS, LISTEN_FDNAMES (the names given) and
// LISTEN_PID (the program's own pid: it is started through /bin/sh, whose pid the program
// keeps by exec). On SIGHUP it restarts the program as `systemctl restart` does: SIGTERM, wait
// until it has exited, start it again on the same sockets; connections that arrive meanwhile
// wait in the sockets' backlog. On SIGTERM or SIGINT it stops the program and exits. It prints
// "started <pid>" on standard output at every start, and exits 1 when the program exits by
// itself.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"pollbal/bench/internal/loopback"
)

// socket is one listening socket to pass, with its name.
type socket struct {
	name string
	file *os.File
}

// listens collects the -listen flags.
type listens []string

func (l *listens) String() string     { return strings.Join(*l, ",") }
func (l *listens) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sockethold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ls listens
	fs.Var(&ls, "listen", "NAME=HOST:PORT: a socket to hold and pass, named NAME in LISTEN_FDNAMES (repeatable, in order)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	command := fs.Args()
	if len(ls) == 0 || len(command) == 0 {
		fmt.Fprintln(stderr, "usage: sockethold -listen NAME=HOST:PORT [-listen ...] -- PROGRAM [ARGS...]")
		return 2
	}
	sockets, err := bind(ls)
	if err != nil {
		fmt.Fprintf(stderr, "sockethold: %v\n", err)
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	for {
		cmd, err := start(sockets, command)
		if err != nil {
			fmt.Fprintf(stderr, "sockethold: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "started %d\n", cmd.Process.Pid)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			fmt.Fprintf(stderr, "sockethold: %s exited by itself: %v\n", command[0], err)
			return 1
		case sig := <-sigs:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := <-exited; err != nil {
				fmt.Fprintf(stderr, "sockethold: %s: %v\n", command[0], err)
			}
			if sig != syscall.SIGHUP {
				return 0
			}
		}
	}
}

// bind opens each NAME=ADDR socket, loopback addresses only.
func bind(ls []string) ([]socket, error) {
	var out []socket
	for _, l := range ls {
		name, addr, ok := strings.Cut(l, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("-listen %q: want NAME=HOST:PORT", l)
		}
		if err := loopback.Check(addr); err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close() // f holds the socket
		if err != nil {
			return nil, err
		}
		out = append(out, socket{name: name, file: f})
	}
	return out, nil
}

// start runs command with the sockets, as systemd starts a socket-activated service.
func start(sockets []socket, command []string) (*exec.Cmd, error) {
	if _, err := exec.LookPath(command[0]); err != nil {
		return nil, err
	}
	names := make([]string, len(sockets))
	files := make([]*os.File, len(sockets))
	for i, s := range sockets {
		names[i], files[i] = s.name, s.file
	}
	args := append([]string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`}, command...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = append(withoutListenVars(os.Environ()), "LISTEN_FDS="+strconv.Itoa(len(sockets)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(errors.New("start "+command[0]), err)
	}
	return cmd, nil
}

// withoutListenVars drops any LISTEN_* variable this process was given.
func withoutListenVars(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "LISTEN_") {
			out = append(out, kv)
		}
	}
	return out
}
