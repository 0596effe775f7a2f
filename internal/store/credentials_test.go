package store

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"pollbal/configs"
	"pollbal/internal/certs/certstest"
)

// The files admin.store.etcd names are read into the client's password and TLS settings; every
// one that cannot be read is a problem of its own, named by its key.
func TestLoadCredentials(t *testing.T) {
	dir := t.TempDir()
	pair := certstest.Write(t, dir, "client", certstest.Options{}, "pollbal")
	password := filepath.Join(dir, "password")
	writeFile(t, password, "  s3cret\n")
	notPEM := filepath.Join(dir, "not.pem")
	writeFile(t, notPEM, "hello\n")
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, " \n")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		etcd         configs.Etcd
		wantPassword string
		wantTLS      bool
		wantCert     bool
		want         []string
	}{
		{name: "no files"},
		{name: "password", etcd: configs.Etcd{Username: "pollbal", PasswordFile: password}, wantPassword: "s3cret"},
		{name: "ca only", etcd: configs.Etcd{CAFile: pair.CertFile}, wantTLS: true},
		{name: "ca and client certificate", etcd: configs.Etcd{CAFile: pair.CertFile, CertFile: pair.CertFile, KeyFile: pair.KeyFile},
			wantTLS: true, wantCert: true},
		{name: "every file wrong",
			etcd: configs.Etcd{Username: "pollbal", PasswordFile: empty, CAFile: notPEM, CertFile: pair.CertFile, KeyFile: filepath.Join(dir, "nokey")},
			want: []string{
				"admin.store.etcd.password_file: " + empty + " is empty",
				"admin.store.etcd.ca_file: " + notPEM + " holds no PEM certificate",
				"admin.store.etcd.key_file: stat " + dir + "/nokey: no such file or directory",
			}},
		{name: "certificate missing", etcd: configs.Etcd{CertFile: filepath.Join(dir, "nocert"), KeyFile: pair.KeyFile},
			want: []string{"admin.store.etcd.cert_file: stat " + dir + "/nocert: no such file or directory"}},
		{name: "named pipes are refused, not waited on",
			etcd: configs.Etcd{Username: "pollbal", PasswordFile: fifo, CAFile: fifo, CertFile: pair.CertFile, KeyFile: fifo},
			want: []string{
				"admin.store.etcd.password_file: " + fifo + ": not a regular file (a named pipe)",
				"admin.store.etcd.ca_file: " + fifo + ": not a regular file (a named pipe)",
				"admin.store.etcd.key_file: " + fifo + ": not a regular file (a named pipe)",
			}},
		{name: "certificate is a named pipe", etcd: configs.Etcd{CertFile: fifo, KeyFile: pair.KeyFile},
			want: []string{"admin.store.etcd.cert_file: " + fifo + ": not a regular file (a named pipe)"}},
		{name: "key not PEM", etcd: configs.Etcd{CertFile: pair.CertFile, KeyFile: notPEM},
			want: []string{"admin.store.etcd.cert_file: tls: failed to find any PEM data in key input"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds, problems := loadCredentials(&tt.etcd)
			if !slices.Equal(problems, tt.want) {
				t.Fatalf("problems\n got  %q\n want %q", problems, tt.want)
			}
			if !slices.Equal(CheckEtcdFiles(&tt.etcd), tt.want) {
				t.Errorf("CheckEtcdFiles disagrees with what New reads")
			}
			if tt.want != nil {
				return
			}
			if creds.password != tt.wantPassword || (creds.tls != nil) != tt.wantTLS {
				t.Fatalf("credentials %+v", creds)
			}
			if tt.wantTLS && (creds.tls.RootCAs == nil || (len(creds.tls.Certificates) == 1) != tt.wantCert) {
				t.Errorf("TLS settings %+v", creds.tls)
			}
		})
	}
}
