package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestParsePool(t *testing.T) {
	sixtyFour := strings.Repeat("# comment\n", 63) + "web\n"
	sixtyFive := strings.Repeat("# comment\n", 64) + "web\n"
	long := "web serving v1\n" + strings.Repeat("#", 4096)
	cases := []struct {
		name    string
		body    string
		maxBody int
		want    []Report
		wantErr string // "" = must succeed; else the exact error text
	}{
		{name: "empty body is ready with no reports", body: "", want: []Report{}},
		{name: "only blank and comment lines", body: "\n# nothing here\n   \n", want: []Report{}},
		{name: "seed leaving with version", body: "servicename leaving v_3",
			want: []Report{{Service: "servicename", Status: Leaving, Version: "v_3"}}},
		{name: "seed serving with version", body: "servicename serving v_3",
			want: []Report{{Service: "servicename", Status: Serving, Version: "v_3"}}},
		{name: "seed service alone defaults to serving", body: "servicename",
			want: []Report{{Service: "servicename", Status: Serving}}},
		{name: "ok is canonicalized to serving", body: "web ok",
			want: []Report{{Service: "web", Status: Serving}}},
		{name: "ok with version", body: "web ok v3\n",
			want: []Report{{Service: "web", Status: Serving, Version: "v3"}}},
		{name: "spec example version with plus", body: "web serving 1.2.3+build.7",
			want: []Report{{Service: "web", Status: Serving, Version: "1.2.3+build.7"}}},
		{name: "CRLF line endings", body: "web serving v1\r\napi leaving v2\r\n",
			want: []Report{{Service: "web", Status: Serving, Version: "v1"},
				{Service: "api", Status: Leaving, Version: "v2"}}},
		{name: "tabs and runs of spaces separate tokens", body: "  web\t\tleaving   v1  ",
			want: []Report{{Service: "web", Status: Leaving, Version: "v1"}}},
		{name: "comments and blank lines are ignored", body: "# pool file\n\nweb serving v1\n  # indented comment\n",
			want: []Report{{Service: "web", Status: Serving, Version: "v1"}}},
		{name: "two services", body: "web serving v1\napi\n",
			want: []Report{{Service: "web", Status: Serving, Version: "v1"},
				{Service: "api", Status: Serving}}},
		{name: "service with dots dashes underscores", body: "a.b-c_d",
			want: []Report{{Service: "a.b-c_d", Status: Serving}}},
		{name: "service of 64 characters", body: strings.Repeat("s", 64),
			want: []Report{{Service: strings.Repeat("s", 64), Status: Serving}}},
		{name: "64 lines counting comments", body: sixtyFour,
			want: []Report{{Service: "web", Status: Serving}}},
		{name: "body exactly at the limit", body: "web", maxBody: 3,
			want: []Report{{Service: "web", Status: Serving}}},

		{name: "duplicate service", body: "web serving v1\napi\nweb leaving v1\n",
			wantErr: `line 3: duplicate service "web"`},
		{name: "unknown status", body: "web\napi down\n", wantErr: `line 2: unknown status "down"`},
		{name: "status is case sensitive", body: "web SERVING", wantErr: `line 1: unknown status "SERVING"`},
		{name: "version requires a status", body: "web v3", wantErr: `line 1: unknown status "v3"`},
		{name: "more than three tokens", body: "web serving v1 extra", wantErr: `line 1: more than 3 fields`},
		{name: "trailing comment is a fourth token", body: "web serving v1 #x", wantErr: `line 1: more than 3 fields`},
		{name: "65 lines", body: sixtyFive, wantErr: `line 65: more than 64 lines`},
		{name: "65 blank lines", body: strings.Repeat("\n", 65), wantErr: `line 65: more than 64 lines`},
		{name: "body over the limit", body: long, maxBody: 4096, wantErr: `body over 4096 bytes`},
		{name: "invalid UTF-8", body: "web\napi serving v\xff1\n", wantErr: `line 2: invalid UTF-8`},
		{name: "service starting with a dash", body: "-web", wantErr: `line 1: invalid service "-web"`},
		{name: "service with a plus", body: "we+b", wantErr: `line 1: invalid service "we+b"`},
		{name: "service of 65 characters", body: strings.Repeat("s", 65),
			wantErr: `line 1: invalid service "` + strings.Repeat("s", 65) + `"`},
		{name: "non-ASCII service", body: "wéb", wantErr: `line 1: invalid service "wéb"`},
		{name: "version starting with a dot", body: "web serving .v1", wantErr: `line 1: invalid version ".v1"`},
		{name: "no-break space is not whitespace", body: "web\u00a0serving", wantErr: `line 1: invalid service "web\u00a0serving"`},
		{name: "one bad line rejects the answer", body: "web\napi\nbad!\n", wantErr: `line 3: invalid service "bad!"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePool([]byte(tc.body), tc.maxBody)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParsePool(%q) = %v, want error %q", tc.body, got, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Fatalf("ParsePool(%q) error = %q, want %q", tc.body, err, tc.wantErr)
				}
				var pe *PoolError
				if !errors.As(err, &pe) {
					t.Fatalf("error %T is not a *PoolError", err)
				}
				if got != nil {
					t.Fatalf("ParsePool(%q) returned reports %v with an error", tc.body, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePool(%q) error: %v", tc.body, err)
			}
			if got == nil {
				t.Fatalf("ParsePool(%q) = nil, want non-nil", tc.body)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParsePool(%q) = %#v, want %#v", tc.body, got, tc.want)
			}
		})
	}
}

var (
	serviceRE = regexp.MustCompile(`^` + ServiceGrammar + `$`)
	versionRE = regexp.MustCompile(`^` + VersionGrammar + `$`)
)

// TestValidNameMatchesSpecRegexps checks the hand-written byte checks against the grammars'
// regexps (docs/protocol.md shows the same ones: TestProtocolDocGrammar).
func TestValidNameMatchesSpecRegexps(t *testing.T) {
	cases := []struct {
		name  string
		token string
	}{
		{name: "empty", token: ""},
		{name: "one letter", token: "a"},
		{name: "one digit", token: "7"},
		{name: "leading underscore", token: "_a"},
		{name: "leading dot", token: ".a"},
		{name: "leading plus", token: "+a"},
		{name: "inner plus", token: "a+b"},
		{name: "all allowed", token: "aZ0_.-"},
		{name: "64 long", token: strings.Repeat("x", 64)},
		{name: "65 long", token: strings.Repeat("x", 65)},
		{name: "slash", token: "a/b"},
		{name: "colon", token: "a:b"},
		{name: "non-ASCII", token: "aé"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := validName([]byte(tc.token), false), serviceRE.MatchString(tc.token); got != want {
				t.Errorf("service %q: validName = %v, regexp = %v", tc.token, got, want)
			}
			if got, want := validName([]byte(tc.token), true), versionRE.MatchString(tc.token); got != want {
				t.Errorf("version %q: validName = %v, regexp = %v", tc.token, got, want)
			}
		})
	}
}

func TestFormatPool(t *testing.T) {
	cases := []struct {
		name    string
		reports []Report
		want    string
	}{
		{name: "none", reports: nil, want: ""},
		{name: "unversioned", reports: []Report{{Service: "web", Status: Serving}}, want: "web serving\n"},
		{name: "versioned leaving", reports: []Report{{Service: "web", Status: Leaving, Version: "v1"}},
			want: "web leaving v1\n"},
		{name: "two", reports: []Report{{Service: "a", Status: Serving}, {Service: "b", Status: Leaving}},
			want: "a serving\nb leaving\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(FormatPool(tc.reports)); got != tc.want {
				t.Fatalf("FormatPool = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzParsePool(f *testing.F) {
	for _, seed := range []string{
		"", "servicename leaving v_3", "servicename serving v_3", "servicename", "web ok",
		"web v3", "web serving v1\r\napi leaving\r\n", "# c\n\nweb\nweb\n", "a\tb\tc\td",
		"web serving 1.2.3+build.7\n", "web\xff", strings.Repeat("x\n", 65),
	} {
		f.Add([]byte(seed))
	}
	const maxBody = 4096
	f.Fuzz(func(t *testing.T, body []byte) {
		reports, err := ParsePool(body, maxBody)
		if err != nil {
			if reports != nil {
				t.Fatalf("reports %v returned with error %v", reports, err)
			}
			return
		}
		if reports == nil {
			t.Fatal("accepted answer gave nil reports")
		}
		canon := FormatPool(reports)
		again, err := ParsePool(canon, len(canon))
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, body, err)
		}
		if !reflect.DeepEqual(again, reports) {
			t.Fatalf("round trip of %q: %#v, want %#v", body, again, reports)
		}
		if !bytes.Equal(FormatPool(again), canon) {
			t.Fatalf("FormatPool is not stable for %q", body)
		}
	})
}
