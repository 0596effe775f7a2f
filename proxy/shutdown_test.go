package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

func TestGracefulShutdown(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // Shutdown's context
		wantErr error
	}{
		{name: "in-flight request finishes before Shutdown returns", timeout: 10 * time.Second},
		{name: "Shutdown bounded by its context, request still finishes", timeout: 50 * time.Millisecond, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arrived := make(chan struct{}, 1)
			gate := make(chan struct{})
			slow := startBackend(t, func(ctx *fasthttp.RequestCtx) {
				arrived <- struct{}{}
				<-gate
				ctx.SetBodyString("finished")
			})
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: slow.addr}}, tieBreakID)
			e := newEnv(t, cfg, "b1")
			rc := dialRaw(t, e.ln, nil)
			if _, err := rc.c.Write([]byte("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			<-arrived

			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			stopped := make(chan error, 1)
			go func() { stopped <- e.p.Shutdown(ctx) }()
			testproc.WaitFor(t, 10*time.Second, "the listener to stop accepting", func() bool {
				c, err := e.ln.Dial()
				if err == nil {
					_ = c.Close()
				}
				return err != nil
			})
			if tt.wantErr == nil {
				select {
				case err := <-stopped:
					t.Fatalf("Shutdown returned %v while a request was in flight", err)
				default:
				}
			} else if err := <-stopped; !errors.Is(err, tt.wantErr) {
				t.Fatalf("Shutdown = %v, want %v", err, tt.wantErr)
			}

			close(gate)
			resp, err := http.ReadResponse(rc.br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != "finished" || !resp.Close {
				t.Errorf("in-flight answer %d %q close=%v, want 200 \"finished\" with Connection: close", resp.StatusCode, body, resp.Close)
			}
			if tt.wantErr == nil {
				if err := <-stopped; err != nil {
					t.Errorf("Shutdown = %v, want nil", err)
				}
			}
			e.waitIdle()
		})
	}
}

// TestShutdownBeforeServe covers a Shutdown that wins the race with Serve: Serve must not start
// accepting afterwards.
func TestShutdownBeforeServe(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, nil, tieBreakID)
	e := newEnv(t, cfg)
	if err := e.p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln2 := fasthttputil.NewInmemoryListener()
	if err := e.p.Serve(ln2); err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
	if _, err := ln2.Dial(); err == nil {
		t.Error("listener still accepts after Serve returned")
	}
}
