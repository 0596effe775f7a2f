package certs

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/certs/certstest"
	"pollbal/internal/regularfile"
	"pollbal/internal/testproc"
)

func cfgOf(pairs ...certstest.Pair) []configs.Certificate {
	out := make([]configs.Certificate, len(pairs))
	for i, p := range pairs {
		out[i] = configs.Certificate{CertFile: p.CertFile, KeyFile: p.KeyFile}
	}
	return out
}

func TestPick(t *testing.T) {
	dir := t.TempDir()
	a := certstest.Write(t, dir, "a", certstest.Options{}, "a.example.com")
	b := certstest.Write(t, dir, "b", certstest.Options{}, "b.example.com", "*.b.example.com")
	c := certstest.Write(t, dir, "c", certstest.Options{}, "x.b.example.com")
	set, err := Load(cfgOf(a, b, c), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, sni string
		want      int
	}{
		{name: "first name", sni: "a.example.com", want: 0},
		{name: "second certificate", sni: "b.example.com", want: 1},
		{name: "case and trailing dot do not matter", sni: "B.Example.COM.", want: 1},
		{name: "wildcard covers one label", sni: "shop.b.example.com", want: 1},
		{name: "exact beats wildcard even when listed later", sni: "x.b.example.com", want: 2},
		{name: "wildcard does not cover two labels", sni: "a.shop.b.example.com", want: 0},
		{name: "unknown name gets the default", sni: "unknown.example.org", want: 0},
		{name: "no SNI gets the default", sni: "", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := set.Pick(tt.sni); got != tt.want {
				t.Errorf("Pick(%q) = %d, want %d", tt.sni, got, tt.want)
			}
		})
	}
}

// TestLoadRefusesANamedPipeAtOnce: a named pipe in place of a certificate or key file is
// refused at once, as a problem naming its key and path (reading it would wait for a writer and
// block the reload), and so is a file over MaxFileSize.
func TestLoadRefusesANamedPipeAtOnce(t *testing.T) {
	dir := t.TempDir()
	good := certstest.Write(t, dir, "good", certstest.Options{}, "good.example.com")
	fifo := filepath.Join(dir, "fifo.crt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.crt")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A sparse file: over the limit without writing it.
	if err := os.Truncate(big, MaxFileSize+1); err != nil {
		t.Fatal(err)
	}
	list := []configs.Certificate{
		{CertFile: fifo, KeyFile: good.KeyFile},
		{CertFile: good.CertFile, KeyFile: fifo},
		{CertFile: big, KeyFile: good.KeyFile},
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(list, time.Now())
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		// Open the pipe for writing so that the blocked reader ends with the test.
		for range 2 {
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
		}
		t.Fatal("Load still blocked on a named pipe after 10s")
	}
	want := []string{
		"tls.certificates[0]: cert_file: " + fifo + ": not a regular file (a named pipe)",
		"tls.certificates[1]: key_file: " + fifo + ": not a regular file (a named pipe)",
		"tls.certificates[2]: cert_file: " + big + ": larger than 1 MiB (1048577 bytes)",
	}
	if got := configs.Problems(err); !slices.Equal(got, want) {
		t.Fatalf("problems:\n got  %q\n want %q", got, want)
	}
	if !errors.Is(err, regularfile.ErrNotRegular) || !errors.Is(err, regularfile.ErrTooLarge) {
		t.Errorf("Load = %v; want it to match regularfile.ErrNotRegular and ErrTooLarge", err)
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	good := certstest.Write(t, dir, "good", certstest.Options{}, "good.example.com")
	other := certstest.Write(t, dir, "other", certstest.Options{}, "other.example.com")
	expired := certstest.Write(t, dir, "expired", certstest.Options{
		NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}, "old.example.com")
	garbage := filepath.Join(dir, "garbage.crt")
	if err := os.WriteFile(garbage, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	list := []configs.Certificate{
		{CertFile: good.CertFile, KeyFile: good.KeyFile},
		{CertFile: good.CertFile, KeyFile: other.KeyFile}, // mismatched
		{CertFile: expired.CertFile, KeyFile: expired.KeyFile},
		{CertFile: filepath.Join(dir, "missing.crt"), KeyFile: good.KeyFile},
		{CertFile: good.CertFile, KeyFile: filepath.Join(dir, "missing.key")},
		{CertFile: garbage, KeyFile: good.KeyFile},
	}
	_, err := Load(list, now)
	got := configs.Problems(err)
	want := []string{
		"tls.certificates[1]: " + good.CertFile + " with " + other.KeyFile + ": tls: private key does not match public key",
		"tls.certificates[2]: " + expired.CertFile + ": certificate for old.example.com expired on ",
		"tls.certificates[3]: cert_file: stat " + filepath.Join(dir, "missing.crt") + ": no such file or directory",
		"tls.certificates[4]: key_file: stat " + filepath.Join(dir, "missing.key") + ": no such file or directory",
		"tls.certificates[5]: " + garbage + " with " + good.KeyFile + ": tls: failed to find any PEM data in certificate input",
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n got  %q\n want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got  %q\n want %q…", i, got[i], want[i])
		}
	}
	if !strings.Contains(got[1], expired.Cert.NotAfter.UTC().Format(time.RFC3339)) {
		t.Errorf("expiry problem does not give the date: %q", got[1])
	}

	// The same expired certificate is fine while it is still valid.
	if _, err := Load(cfgOf(expired), now.Add(-36*time.Hour)); err != nil {
		t.Errorf("before expiry: %v", err)
	}
}

// handshake connects to addr with SNI serverName and returns the DNS names of the certificate
// served, or the handshake error.
func handshake(t *testing.T, addr, serverName string, maxVersion uint16) ([]string, uint16, error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{
		ServerName:         serverName,
		InsecureSkipVerify: true, // the test looks at which certificate was served
		MaxVersion:         maxVersion,
	})
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	st := conn.ConnectionState()
	return st.PeerCertificates[0].DNSNames, st.Version, nil
}

// serveTLS accepts TLS connections on 127.0.0.1 with the store's config and completes their
// handshakes.
func serveTLS(t *testing.T, s *Store) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	return testproc.Serve(t, ln, func(c net.Conn) {
		_ = c.(*tls.Conn).Handshake()
		buf := make([]byte, 1)
		_, _ = c.Read(buf) // until the client closes
	})
}

func TestStoreServesBySNIAndSwaps(t *testing.T) {
	dir := t.TempDir()
	a := certstest.Write(t, dir, "a", certstest.Options{}, "a.example.com")
	b := certstest.Write(t, dir, "b", certstest.Options{}, "b.example.com")
	set, err := Load(cfgOf(a, b), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(set, tls.VersionTLS12, []string{"http/1.1"})
	addr := serveTLS(t, store)

	for _, tc := range []struct{ sni, want string }{
		{"a.example.com", "a.example.com"},
		{"b.example.com", "b.example.com"},
		{"unknown.example.com", "a.example.com"},
	} {
		got, _, err := handshake(t, addr, tc.sni, 0)
		if err != nil {
			t.Fatalf("SNI %s: %v", tc.sni, err)
		}
		if !slices.Equal(got, []string{tc.want}) {
			t.Errorf("SNI %s: served %v, want %s", tc.sni, got, tc.want)
		}
	}
	if _, v, err := handshake(t, addr, "a.example.com", tls.VersionTLS12); err != nil || v != tls.VersionTLS12 {
		t.Errorf("TLS 1.2 client with min_version 1.2: version %x, err %v", v, err)
	}

	// A swap: b is now the default, and TLS 1.2 is refused.
	set2, err := Load(cfgOf(b), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	store.Swap(set2, tls.VersionTLS13)
	if got, v, err := handshake(t, addr, "a.example.com", 0); err != nil || !slices.Equal(got, []string{"b.example.com"}) || v != tls.VersionTLS13 {
		t.Errorf("after swap: served %v version %x err %v, want b.example.com over TLS 1.3", got, v, err)
	}
	_, _, err = handshake(t, addr, "b.example.com", tls.VersionTLS12)
	if err == nil {
		t.Fatal("TLS 1.2 client accepted with min_version 1.3")
	}
	var alert tls.AlertError
	if !errors.As(err, &alert) && !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.2 client: %v, want a protocol version alert", err)
	}
}

func TestVersion(t *testing.T) {
	tests := []struct {
		name, in string
		want     uint16
		wantErr  bool
	}{
		{name: "1.2", in: "1.2", want: tls.VersionTLS12},
		{name: "1.3", in: "1.3", want: tls.VersionTLS13},
		{name: "older versions are not offered", in: "1.1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Version(tt.in)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("Version(%q) = %x, %v", tt.in, got, err)
			}
		})
	}
}
