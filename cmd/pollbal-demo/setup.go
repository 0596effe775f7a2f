package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"pollbal/configs"
	"pollbal/internal/testbackend/api"
)

// bins are the absolute paths of the programs the demo runs.
type bins struct{ pollbal, backend, script string }

func (d *demo) binaries() (bins, error) {
	var b bins
	for _, p := range []struct {
		dst  *string
		path string
		flag string
	}{{&b.pollbal, d.o.Pollbal, "-pollbal"}, {&b.backend, d.o.Backend, "-backend"}, {&b.script, d.o.UpdateScript, "-update-script"}} {
		abs, err := filepath.Abs(p.path)
		if err != nil {
			return b, fmt.Errorf("%s %s: %w", p.flag, p.path, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return b, fmt.Errorf("%s: %w (build it first: make build)", p.flag, err)
		}
		*p.dst = abs
	}
	return b, nil
}

// writeConfig writes the shipped demo config, rewritten for this run, into the temp dir and
// makes the plan from it.
func (d *demo) writeConfig() (string, error) {
	data, ok := configs.Shipped()["demo.yaml"]
	if !ok {
		return "", errors.New("the shipped configs hold no demo.yaml")
	}
	rw := rewrite{Note: "Written by `make demo` from the shipped configs/demo.yaml."}
	if d.o.PortsFromConfig {
		rw.Addr = shiftPort(d.o.PortOffset)
		if d.o.PortOffset != 0 {
			rw.Note += fmt.Sprintf("\nEvery port is shifted by %d (-port-offset).", d.o.PortOffset)
		}
	} else {
		ports, err := freePorts(2 + 16) // listen, admin and up to 16 backends
		if err != nil {
			return "", err
		}
		rw.Addr = assignPorts(ports)
		rw.Note += "\nPorts are free ones picked for this run (-ports-from-config=false)."
	}
	if d.o.WarningScope == scopeService {
		rw.Scope = configs.ScopeService
		rw.Note += "\nwarning_scope is service: with scope version and two backends per pool, the last" +
			"\nv1 backend of each pool would be warned for ever and never update (-warning-scope config)."
	}
	out, err := rewriteConfig(data, rw)
	if err != nil {
		return "", err
	}
	cfg, err := configs.Parse(out)
	if err != nil {
		return "", fmt.Errorf("rewritten demo config: %w", err)
	}
	if d.plan, err = newPlan(cfg); err != nil {
		return "", err
	}
	if err := d.portsFree(); err != nil {
		return "", err
	}
	path := filepath.Join(d.dir, "pollbal.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", fmt.Errorf("write config: %w", err)
	}
	return path, nil
}

// portsFree fails early, with advice, when another program holds one of the demo's ports.
func (d *demo) portsFree() error {
	addrs := []string{d.plan.Proxy, d.plan.Admin}
	for _, b := range d.plan.Backends {
		addrs = append(addrs, b.Address)
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("port %s is taken (is another demo running? try %s or %s): %w", a,
				flagAdvice("-port-offset 1000", d.o.ViaMake), flagAdvice("-ports-from-config=false", d.o.ViaMake), err)
		}
		_ = ln.Close()
	}
	return nil
}

// freePorts asks the kernel for n free ports on 127.0.0.1, holding all of them until every
// one is known so that none is given twice.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// start starts one child with its output in <dir>/<name>.log and stops it at cleanup.
func (d *demo) start(name, path string, args []string, count func(string)) (*child, error) {
	log, err := newTailWriter(filepath.Join(d.dir, name+".log"), logLines, count)
	if err != nil {
		return nil, err
	}
	c, err := startChild(name, path, args, log)
	if err != nil {
		_ = log.Close()
		return nil, err
	}
	d.cleanup = append(d.cleanup, func() {
		c.stop(stopGrace)
		_ = log.Close()
	})
	return c, nil
}

func (d *demo) poolFile(id string) string { return filepath.Join(d.dir, id+".pool") }
func (d *demo) lockFile(id string) string { return filepath.Join(d.dir, id+".lock") }

// startBackends starts every example backend serving fromVersion and waits until each answers.
func (d *demo) startBackends(ctx context.Context, bin string) error {
	children := map[string]*child{}
	for _, b := range d.plan.Backends {
		line := fmt.Sprintf("%s serving %s\n", d.plan.Service, fromVersion)
		if err := os.WriteFile(d.poolFile(b.ID), []byte(line), 0o644); err != nil {
			return fmt.Errorf("pool file: %w", err)
		}
		c, err := d.start(b.ID, bin, []string{
			"-listen", b.Address, "-id", b.ID, "-pool-file", d.poolFile(b.ID), "-lock-file", d.lockFile(b.ID),
		}, nil)
		if err != nil {
			return err
		}
		children[b.ID] = c
	}
	for _, b := range d.plan.Backends {
		c := children[b.ID]
		err := waitUntil(ctx, startTimeout, 50*time.Millisecond, "backend "+b.ID+" answering", func() (bool, error) {
			if c.exit.IsSet() {
				return false, fmt.Errorf("backend %s exited:\n%s", b.ID, c.log.tail())
			}
			var s api.Stats
			return getJSON(ctx, d.http, "http://"+b.Address+"/_backend/stats", &s) == nil, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// startPollbal starts pollbal and waits for /readyz and for every backend to be ready and
// serving fromVersion in its state.
func (d *demo) startPollbal(ctx context.Context, bin, cfg string) (*child, error) {
	c, err := d.start("pollbal", bin, []string{"run", "-config", cfg}, nil)
	if err != nil {
		return nil, err
	}
	exited := func() error {
		if c.exit.IsSet() {
			return fmt.Errorf("pollbal exited with status %d:\n%s", c.exitCode(), c.log.tail())
		}
		return nil
	}
	err = waitUntil(ctx, startTimeout, 50*time.Millisecond, "pollbal /readyz", func() (bool, error) {
		if err := exited(); err != nil {
			return false, err
		}
		resp, err := d.http.Get("http://" + d.plan.Admin + "/readyz")
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, err
	}
	ids := d.backendIDs()
	err = waitUntil(ctx, startTimeout, 50*time.Millisecond, "every backend serving "+fromVersion, func() (bool, error) {
		if err := exited(); err != nil {
			return false, err
		}
		var s apiState
		if err := getJSON(ctx, d.http, "http://"+d.plan.Admin+"/api/state", &s); err != nil {
			return false, nil
		}
		return allOn(s, d.plan.Service, fromVersion, ids), nil
	})
	return c, err
}

func (d *demo) backendIDs() []string {
	ids := make([]string, len(d.plan.Backends))
	for i, b := range d.plan.Backends {
		ids[i] = b.ID
	}
	return ids
}
