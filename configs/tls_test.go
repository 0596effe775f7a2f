package configs

import "testing"

// The tls section: strict keys, every problem with its line, and plain HTTP off only with TLS on.
func TestParseTLS(t *testing.T) {
	tests := []problemCase{
		{name: "TLS next to plain HTTP",
			doc: "tls:\n  listen: 127.0.0.1:8443\n  certificates:\n    - {cert_file: a.crt, key_file: a.key}\n"},
		{name: "TLS only: an empty listen turns plain HTTP off",
			doc: "listen: \"\"\ntls:\n  listen: 127.0.0.1:8443\n  certificates:\n    - {cert_file: a.crt, key_file: a.key}\n"},
		{name: "min_version 1.3 unquoted",
			doc: "tls:\n  listen: 127.0.0.1:8443\n  min_version: 1.3\n  certificates:\n    - {cert_file: a.crt, key_file: a.key}\n"},
		{name: "no listener at all",
			doc:  "listen: \"\"\n",
			want: []string{"listen: required (it may be empty only when tls.listen is set) (line 14)"}},
		{name: "TLS listen without certificates",
			doc:  "tls:\n  listen: 127.0.0.1:8443\n",
			want: []string{"tls.certificates: at least one certificate required when tls.listen is set"}},
		{name: "an empty certificate list names its line",
			doc:  "tls:\n  listen: 127.0.0.1:8443\n  certificates: []\n",
			want: []string{"tls.certificates: at least one certificate required when tls.listen is set (line 16)"}},
		{name: "certificates without a TLS listener",
			doc:  "tls:\n  certificates:\n    - {cert_file: a.crt, key_file: a.key}\n",
			want: []string{"tls.listen: required when tls.certificates are set (or remove them)"}},
		{name: "a certificate missing its files",
			doc: "tls:\n  listen: 127.0.0.1:8443\n  certificates:\n    - cert_file: a.crt\n    - key_file: b.key\n",
			want: []string{
				"tls.certificates[0].key_file: required",
				"tls.certificates[1].cert_file: required",
			}},
		{name: "bad min_version",
			doc:  "tls:\n  listen: 127.0.0.1:8443\n  min_version: \"1.1\"\n  certificates:\n    - {cert_file: a.crt, key_file: b.key}\n",
			want: []string{`tls.min_version: must be "1.2" or "1.3" (got "1.1") (line 16)`}},
		{name: "bad TLS address",
			doc:  "tls:\n  listen: 8443\n  certificates:\n    - {cert_file: a.crt, key_file: b.key}\n",
			want: []string{"tls.listen: missing port (line 15)"}},
		{name: "TLS on the plain listener's socket",
			doc:  "tls:\n  listen: 127.0.0.1:8080\n  certificates:\n    - {cert_file: a.crt, key_file: b.key}\n",
			want: []string{"tls.listen: must differ from listen (127.0.0.1:8080) (line 15)"}},
		{name: "TLS on the admin socket",
			doc:  "tls:\n  listen: :9090\n  certificates:\n    - {cert_file: a.crt, key_file: b.key}\n",
			want: []string{"tls.listen: must differ from admin.listen (127.0.0.1:9090) (line 15)"}},
		{name: "unknown key",
			doc:  "tls:\n  listen: 127.0.0.1:8443\n  ciphers: [x]\n  certificates:\n    - {cert_file: a.crt, key_file: b.key}\n",
			want: []string{"tls.ciphers: unknown key (line 16)"}},
		{name: "cert_file must be a string",
			doc:  "tls:\n  listen: 127.0.0.1:8443\n  certificates:\n    - {cert_file: [a], key_file: b.key}\n",
			want: []string{"tls.certificates[0].cert_file: must be a string, got a list (line 17)"}},
	}
	checkProblems(t, baseYAML, tests)
}
