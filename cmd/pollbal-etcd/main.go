package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"pollbal/internal/cmdline"
)

// readyTimeout bounds the wait for the server to be ready.
const readyTimeout = 30 * time.Second

func main() { cmdline.Main(run) }

// options is the parsed command line.
type options struct {
	listen, peer, dataDir string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cmdline.NewFlagSet("pollbal-etcd", stderr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:2379", "client address (a loopback host:port)")
	fs.StringVar(&o.peer, "peer", "", "peer address (a loopback host:port; default: a free port on 127.0.0.1)")
	fs.StringVar(&o.dataDir, "data-dir", "", "where the data lives (required; created if absent, kept on exit)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pollbal-etcd -data-dir DIR [-listen 127.0.0.1:2379] [-peer HOST:PORT]")
		fmt.Fprintln(stderr, "A single-member etcd on loopback addresses, for trying pollbal's shared moves; not for production.")
		fs.PrintDefaults()
	}
	if err := cmdline.Parse(fs, args); err != nil {
		return o, err
	}
	if o.dataDir == "" {
		return o, cmdline.Refuse(fs, "-data-dir is required")
	}
	for _, a := range []struct{ flag, addr string }{{"-listen", o.listen}, {"-peer", o.peer}} {
		if a.addr != "" && !loopback(a.addr) {
			return o, cmdline.Refuse(fs, "%s %s: want a loopback address such as 127.0.0.1:2379 (this etcd has no authentication)", a.flag, a.addr)
		}
	}
	return o, nil
}

// loopback reports whether addr is host:port with a loopback IP for host.
func loopback(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return cmdline.ExitCode(err)
	}
	if o.peer == "" {
		if o.peer, err = freeLoopbackAddr(); err != nil {
			fmt.Fprintf(stderr, "pollbal-etcd: %v\n", err)
			return 1
		}
	}
	srv, err := start(o)
	if err != nil {
		fmt.Fprintf(stderr, "pollbal-etcd: %v\n", err)
		return 1
	}
	defer srv.Close()
	select {
	case <-srv.Server.ReadyNotify():
	case <-time.After(readyTimeout):
		fmt.Fprintf(stderr, "pollbal-etcd: not ready after %s\n", readyTimeout)
		return 1
	case <-ctx.Done():
		return 0
	}
	fmt.Fprintf(stdout, "etcd serving on %s (data in %s); Ctrl-C stops it\n", o.listen, o.dataDir)
	select {
	case <-ctx.Done():
		return 0
	case err := <-srv.Err():
		fmt.Fprintf(stderr, "pollbal-etcd: %v\n", err)
		return 1
	}
}

// start starts the member; its logs are dropped (its errors come back through Err).
func start(o options) (*embed.Etcd, error) {
	dir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "pollbal-etcd"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu := url.URL{Scheme: "http", Host: o.listen}
	pu := url.URL{Scheme: "http", Host: o.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd on %s: %w", o.listen, err)
	}
	return srv, nil
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.New("no free port on 127.0.0.1 for the peer listener")
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
