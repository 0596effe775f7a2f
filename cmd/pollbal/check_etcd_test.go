package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pollbal/internal/certs/certstest"
)

// pollbal check reads the files admin.store.etcd names and rejects endpoints that are not
// host:port, each problem on its own line.
func TestCheckEtcdStore(t *testing.T) {
	dir := t.TempDir()
	pair := certstest.Write(t, dir, "client", certstest.Options{}, "pollbal")
	password := filepath.Join(dir, "password")
	notPEM := filepath.Join(dir, "not.pem")
	for path, content := range map[string]string{password: "s3cret\n", notPEM: "hello\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := fillAddrs(foundationConfig([]string{"127.0.0.1:9001"}), "127.0.0.1:8080", "127.0.0.1:9090")
	withStore := func(name, store string) string {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		cfg := strings.Replace(base, "admin:\n  listen: 127.0.0.1:9090\n", "admin:\n  listen: 127.0.0.1:9090\n  store:\n    etcd:\n"+store, 1)
		if cfg == base {
			t.Fatal("foundationConfig changed: no admin block to extend")
		}
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name     string
		store    string
		wantCode int
		want     []string // the lines printed, in order
	}{
		{name: "every file readable",
			store: "      endpoints: [127.0.0.1:2379]\n      username: pollbal\n      password_file: " + password +
				"\n      ca_file: " + pair.CertFile + "\n      cert_file: " + pair.CertFile + "\n      key_file: " + pair.KeyFile + "\n",
			want: []string{"ok"}},
		{name: "unreadable files",
			store: "      endpoints: [127.0.0.1:2379]\n      username: pollbal\n      password_file: " + dir + "/nope" +
				"\n      ca_file: " + notPEM + "\n      cert_file: " + pair.CertFile + "\n      key_file: " + dir + "/nokey\n",
			wantCode: 1,
			want: []string{
				"admin.store.etcd.password_file: stat " + dir + "/nope: no such file or directory",
				"admin.store.etcd.ca_file: " + notPEM + " holds no PEM certificate",
				"admin.store.etcd.key_file: stat " + dir + "/nokey: no such file or directory",
			}},
		{name: "bad endpoints",
			store:    "      endpoints: [\"http://127.0.0.1:2379\", \"etcd-1\", \"127.0.0.1:99999\"]\n",
			wantCode: 1,
			want: []string{
				`admin.store.etcd.endpoints[0]: "http://127.0.0.1:2379" is a URL: drop "http://" and any path (want host:port, e.g. 127.0.0.1:2379) (line 7)`,
				"admin.store.etcd.endpoints[1]: missing port (line 7)",
				`admin.store.etcd.endpoints[2]: port "99999" must be a number from 1 to 65535 (line 7)`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			code := realMain([]string{"check", "-config", withStore(tc.name, tc.store)}, &out, &errOut)
			got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if code != tc.wantCode || !slices.Equal(got, tc.want) {
				t.Fatalf("exit %d, want %d\n got  %q\n want %q\n stderr %q", code, tc.wantCode, got, tc.want, errOut.String())
			}
		})
	}
}
