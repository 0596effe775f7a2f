package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pollbal/internal/certs/certstest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// tlsConfig is one backend behind one app, with a TLS listener (TLSLISTEN) serving the given
// pairs; plain is the plain listener's line ("LISTEN", or `""` for TLS only).
func tlsConfig(tokenFile, plain, minVersion, backend string, pairs ...certstest.Pair) string {
	var b strings.Builder
	fmt.Fprintf(&b, `site: e2e
listen: %s
admin: {listen: ADMIN, token_file: %s}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends: [{id: web-1, address: %s}]
tls:
  listen: TLSLISTEN
  min_version: "%s"
  certificates:
`, plain, tokenFile, backend, minVersion)
	for _, p := range pairs {
		fmt.Fprintf(&b, "    - cert_file: %s\n      key_file: %s\n", p.CertFile, p.KeyFile)
	}
	return b.String()
}

// tlsClient talks to one pollbal TLS listener, trusting the test's certificates.
type tlsClient struct {
	addr  string
	roots *x509.CertPool
}

// served connects with SNI name (and at most TLS maxVersion, 0 for any) and returns the DNS
// names of the certificate pollbal served, or the handshake's error.
func (c tlsClient) served(name string, maxVersion uint16) ([]string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.addr,
		&tls.Config{ServerName: name, RootCAs: c.roots, MaxVersion: maxVersion, InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].DNSNames, nil
}

// httpClient verifies the certificate for serverName.
func (c tlsClient) httpClient(serverName string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: serverName, RootCAs: c.roots},
	}}
}

// get asks for / over TLS and returns the status and the X-Forwarded-Proto the backend saw.
func getProto(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Backend-Forwarded-Proto")
}

// TestEndToEndTLS runs the real binary with a TLS listener next to the plain one: SNI picks
// each of two certificates (the first for unknown names), requests reach the backend with
// X-Forwarded-Proto: https, reloads with a mismatched, expired or missing pair are rejected
// whole (the old certificates stay), and a valid reload swaps certificates and min_version.
func TestEndToEndTLS(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	a := certstest.Write(t, dir, "a", certstest.Options{}, "a.e2e.test")
	b := certstest.Write(t, dir, "b", certstest.Options{}, "b.e2e.test")
	expired := certstest.Write(t, dir, "expired", certstest.Options{
		NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)}, "old.e2e.test")
	mismatched := certstest.Pair{CertFile: a.CertFile, KeyFile: b.KeyFile}
	missing := certstest.Pair{CertFile: filepath.Join(dir, "none.crt"), KeyFile: a.KeyFile}

	be := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	token := writeToken(t)
	tlsAddr := testproc.FreeAddr(t)
	config := func(minVersion string, pairs ...certstest.Pair) string {
		return strings.ReplaceAll(tlsConfig(token, "LISTEN", minVersion, be.addr, pairs...), "TLSLISTEN", tlsAddr)
	}
	pb := startPollbal(t, config("1.2", a, b))
	c := tlsClient{addr: tlsAddr, roots: certstest.Pool(a, b)}
	testproc.WaitFor(t, 5*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := pb.state(t).backend("web-1")
		return ready
	})

	wantServed := func(t *testing.T, sni, want string) {
		t.Helper()
		got, err := c.served(sni, 0)
		if err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("SNI %q: served %v (err %v), want %s", sni, got, err, want)
		}
	}

	t.Run("SNI picks each certificate, the first is the default", func(t *testing.T) {
		wantServed(t, "a.e2e.test", "a.e2e.test")
		wantServed(t, "b.e2e.test", "b.e2e.test")
		wantServed(t, "unknown.e2e.test", "a.e2e.test")
		if _, err := c.served("b.e2e.test", tls.VersionTLS12); err != nil {
			t.Errorf("TLS 1.2 client with min_version 1.2: %v", err)
		}
	})

	t.Run("X-Forwarded-Proto https reaches the backend", func(t *testing.T) {
		for _, name := range []string{"a.e2e.test", "b.e2e.test"} {
			if code, proto := getProto(t, c.httpClient(name), "https://"+tlsAddr+"/"); code != 200 || proto != "https" {
				t.Errorf("over TLS (%s): %d, backend saw X-Forwarded-Proto %q, want 200 https", name, code, proto)
			}
		}
		if code, proto := getProto(t, http.DefaultClient, "http://"+pb.listen+"/"); code != 200 || proto != "http" {
			t.Errorf("plain: %d, backend saw X-Forwarded-Proto %q, want 200 http", code, proto)
		}
	})

	// A keep-alive TLS connection opened before the reloads; it must live through all of them.
	kept := c.httpClient("a.e2e.test")
	if code, _ := getProto(t, kept, "https://"+tlsAddr+"/"); code != 200 {
		t.Fatalf("kept connection: %d", code)
	}

	for _, bad := range []struct {
		name  string
		pairs []certstest.Pair
		want  string
	}{
		{name: "mismatched pair", pairs: []certstest.Pair{a, mismatched}, want: "tls.certificates[1]: " + a.CertFile + " with " + b.KeyFile + ": tls: private key does not match public key"},
		{name: "expired certificate", pairs: []certstest.Pair{expired, b}, want: "tls.certificates[0]: " + expired.CertFile + ": certificate for old.e2e.test expired on"},
		{name: "missing file", pairs: []certstest.Pair{b, missing}, want: "tls.certificates[1]: cert_file: stat " + missing.CertFile},
	} {
		t.Run("reload rejected whole: "+bad.name, func(t *testing.T) {
			before := rejectedCount(t, pb, "config_invalid")
			// The rest of the file changes too (min_version), and none of it may apply.
			writeInPlace(t, pb.cfgPath, fillAddrs(config("1.3", bad.pairs...), pb.listen, pb.admin))
			ans := postReload(t, pb, "")
			if ans.code == 200 || ans.Reason != "config_invalid" || !strings.Contains(ans.Error, bad.want) {
				t.Fatalf("answer %+v, want a config_invalid rejection naming %q", ans, bad.want)
			}
			if got := rejectedCount(t, pb, "config_invalid"); got != before+1 || reloadGauge(t, pb) != 0 {
				t.Errorf("rejected count %v (was %v), gauge %v; want +1 and 0", got, before, reloadGauge(t, pb))
			}
			wantServed(t, "a.e2e.test", "a.e2e.test")
			wantServed(t, "b.e2e.test", "b.e2e.test")
			if _, err := c.served("a.e2e.test", tls.VersionTLS12); err != nil {
				t.Errorf("min_version changed by a rejected reload: TLS 1.2 refused: %v", err)
			}
		})
	}

	t.Run("check reports the same problems", func(t *testing.T) {
		for _, bad := range []struct {
			name  string
			pairs []certstest.Pair
			want  string
		}{
			{name: "mismatched", pairs: []certstest.Pair{a, mismatched}, want: "private key does not match public key"},
			{name: "expired", pairs: []certstest.Pair{a, expired}, want: "tls.certificates[1]: " + expired.CertFile + ": certificate for old.e2e.test expired on"},
			{name: "valid", pairs: []certstest.Pair{a, b}, want: "ok"},
		} {
			path := filepath.Join(t.TempDir(), "check.yaml")
			writeInPlace(t, path, fillAddrs(config("1.2", bad.pairs...), "127.0.0.1:8080", "127.0.0.1:9090"))
			out, err := exec.Command(bins.pollbal, "check", "-config", path).Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			wantCode := 1
			if bad.name == "valid" {
				wantCode = 0
			}
			if code != wantCode || !strings.Contains(string(out), bad.want) {
				t.Errorf("%s: check exit %d output %q, want exit %d with %q", bad.name, code, out, wantCode, bad.want)
			}
		}
	})

	t.Run("moving the TLS listener needs a restart", func(t *testing.T) {
		moved := strings.ReplaceAll(tlsConfig(token, "LISTEN", "1.2", be.addr, a, b), "TLSLISTEN", testproc.FreeAddr(t))
		writeInPlace(t, pb.cfgPath, fillAddrs(moved, pb.listen, pb.admin))
		if ans := postReload(t, pb, ""); ans.Reason != "restart_required" || !strings.Contains(ans.Error, "tls.listen: changing "+tlsAddr) {
			t.Errorf("answer %+v, want restart_required for tls.listen", ans)
		}
		wantServed(t, "b.e2e.test", "b.e2e.test")
	})

	t.Run("a valid reload swaps certificates and min_version", func(t *testing.T) {
		writeInPlace(t, pb.cfgPath, fillAddrs(config("1.3", b, a), pb.listen, pb.admin))
		if ans := postReload(t, pb, ""); ans.code != 200 {
			t.Fatalf("reload: %+v", ans)
		}
		if reloadGauge(t, pb) != 1 {
			t.Error("reload gauge not 1 after a valid reload")
		}
		wantServed(t, "unknown.e2e.test", "b.e2e.test") // b is first now
		wantServed(t, "a.e2e.test", "a.e2e.test")
		if _, err := c.served("a.e2e.test", tls.VersionTLS12); err == nil {
			t.Error("TLS 1.2 client accepted after min_version 1.3 was reloaded")
		}
		if code, proto := getProto(t, kept, "https://"+tlsAddr+"/"); code != 200 || proto != "https" {
			t.Errorf("connection from before the reloads: %d %q", code, proto)
		}
	})
}

// With listen "" pollbal serves TLS only.
func TestEndToEndTLSOnly(t *testing.T) {
	dir := t.TempDir()
	a := certstest.Write(t, dir, "a", certstest.Options{}, "a.e2e.test")
	be := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	tlsAddr := testproc.FreeAddr(t)
	pb := startPollbal(t, strings.ReplaceAll(tlsConfig(writeToken(t), `""`, "1.2", be.addr, a), "TLSLISTEN", tlsAddr))
	c := tlsClient{addr: tlsAddr, roots: certstest.Pool(a)}
	testproc.WaitFor(t, 5*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := pb.state(t).backend("web-1")
		return ready
	})
	if code, proto := getProto(t, c.httpClient("a.e2e.test"), "https://"+tlsAddr+"/"); code != 200 || proto != "https" {
		t.Errorf("over TLS: %d %q, want 200 https", code, proto)
	}
	if conn, err := net.DialTimeout("tcp", pb.listen, time.Second); err == nil {
		conn.Close()
		t.Errorf("something listens on %s with listen: \"\"", pb.listen)
	}
	pb.WaitOutput(t, 5*time.Second, "the start log saying plain HTTP is off (listen=off)", "listen=off")
}

// TestEndToEndTLSHandshakeErrors: a failed TLS handshake is not a request. A client speaking
// plain HTTP to the TLS listener, and one that does not trust pollbal's certificate, are
// counted in pollbal_tls_handshake_errors_total; before, the server's error handler answered
// each with a 400 that no one could read and counted it in pollbal_requests_total{code="400"}.
func TestEndToEndTLSHandshakeErrors(t *testing.T) {
	dir := t.TempDir()
	a := certstest.Write(t, dir, "a", certstest.Options{}, "a.e2e.test")
	be := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	tlsAddr := testproc.FreeAddr(t)
	pb := startPollbal(t, strings.ReplaceAll(tlsConfig(writeToken(t), "LISTEN", "1.2", be.addr, a), "TLSLISTEN", tlsAddr))
	c := tlsClient{addr: tlsAddr, roots: certstest.Pool(a)}
	testproc.WaitFor(t, 5*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := pb.state(t).backend("web-1")
		return ready
	})

	plain, err := net.Dial("tcp", tlsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Write([]byte("GET / HTTP/1.1\r\nHost: a.e2e.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := plain.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(plain); err != nil {
		t.Fatalf("plain HTTP to the TLS listener: not closed: %v", err)
	}
	if conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "a.e2e.test", RootCAs: x509.NewCertPool()}); err == nil {
		conn.Close()
		t.Fatal("a client that trusts no certificate completed its handshake")
	}
	var text string
	testproc.WaitFor(t, 10*time.Second, "two failed handshakes counted", func() bool {
		text = pb.metrics(t)
		n, _ := metrictest.TextValue(t, text, "pollbal_tls_handshake_errors_total")
		return n == 2
	})
	if code, proto := getProto(t, c.httpClient("a.e2e.test"), "https://"+tlsAddr+"/"); code != 200 || proto != "https" {
		t.Errorf("a good TLS client after them: %d %q, want 200 https", code, proto)
	}
	text = pb.metrics(t)
	metrictest.ExpectText(t, text, map[string]float64{
		`pollbal_tls_handshake_errors_total`:            2,
		`pollbal_requests_total{app="www",code="200"}`:  1,
		`pollbal_responses_total{reason="bad_request"}`: 0,
	}, `pollbal_requests_total{app="-",code="400"}`)
}
