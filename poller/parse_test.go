package poller

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"pollbal/report"
)

func TestParse(t *testing.T) {
	sixtyFour := strings.Repeat("# comment\n", 63) + "web\n"
	sixtyFive := strings.Repeat("# comment\n", 64) + "web\n"
	long := "web serving v1\n" + strings.Repeat("#", 4096)
	cases := []struct {
		name    string
		body    string
		maxBody int
		want    []report.Report
		wantErr string // "" = must succeed; else the exact error text
	}{
		{name: "empty body is ready with no reports", body: "", want: []report.Report{}},
		{name: "only blank and comment lines", body: "\n# nothing here\n   \n", want: []report.Report{}},
		{name: "seed leaving with version", body: "servicename leaving v_3",
			want: []report.Report{{Service: "servicename", Status: report.Leaving, Version: "v_3"}}},
		{name: "seed serving with version", body: "servicename serving v_3",
			want: []report.Report{{Service: "servicename", Status: report.Serving, Version: "v_3"}}},
		{name: "seed service alone defaults to serving", body: "servicename",
			want: []report.Report{{Service: "servicename", Status: report.Serving}}},
		{name: "ok is canonicalized to serving", body: "web ok",
			want: []report.Report{{Service: "web", Status: report.Serving}}},
		{name: "ok with version", body: "web ok v3\n",
			want: []report.Report{{Service: "web", Status: report.Serving, Version: "v3"}}},
		{name: "spec example version with plus", body: "web serving 1.2.3+build.7",
			want: []report.Report{{Service: "web", Status: report.Serving, Version: "1.2.3+build.7"}}},
		{name: "CRLF line endings", body: "web serving v1\r\napi leaving v2\r\n",
			want: []report.Report{{Service: "web", Status: report.Serving, Version: "v1"},
				{Service: "api", Status: report.Leaving, Version: "v2"}}},
		{name: "tabs and runs of spaces separate tokens", body: "  web\t\tleaving   v1  ",
			want: []report.Report{{Service: "web", Status: report.Leaving, Version: "v1"}}},
		{name: "comments and blank lines are ignored", body: "# pool file\n\nweb serving v1\n  # indented comment\n",
			want: []report.Report{{Service: "web", Status: report.Serving, Version: "v1"}}},
		{name: "two services", body: "web serving v1\napi\n",
			want: []report.Report{{Service: "web", Status: report.Serving, Version: "v1"},
				{Service: "api", Status: report.Serving}}},
		{name: "service with dots dashes underscores", body: "a.b-c_d",
			want: []report.Report{{Service: "a.b-c_d", Status: report.Serving}}},
		{name: "service of 64 characters", body: strings.Repeat("s", 64),
			want: []report.Report{{Service: strings.Repeat("s", 64), Status: report.Serving}}},
		{name: "64 lines counting comments", body: sixtyFour,
			want: []report.Report{{Service: "web", Status: report.Serving}}},
		{name: "body exactly at the limit", body: "web", maxBody: 3,
			want: []report.Report{{Service: "web", Status: report.Serving}}},

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
			got, err := Parse([]byte(tc.body), tc.maxBody)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want error %q", tc.body, got, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Fatalf("Parse(%q) error = %q, want %q", tc.body, err, tc.wantErr)
				}
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %T is not a *ParseError", err)
				}
				if got != nil {
					t.Fatalf("Parse(%q) returned reports %v with an error", tc.body, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tc.body, err)
			}
			if got == nil {
				t.Fatalf("Parse(%q) = nil, want non-nil", tc.body)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%q) = %#v, want %#v", tc.body, got, tc.want)
			}
		})
	}
}

var (
	serviceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$`)
)

// TestValidNameMatchesSpecRegexps checks the hand-written byte checks against SPEC §2's regexps.
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

func TestFormat(t *testing.T) {
	cases := []struct {
		name    string
		reports []report.Report
		want    string
	}{
		{name: "none", reports: nil, want: ""},
		{name: "unversioned", reports: []report.Report{{Service: "web", Status: report.Serving}}, want: "web serving\n"},
		{name: "versioned leaving", reports: []report.Report{{Service: "web", Status: report.Leaving, Version: "v1"}},
			want: "web leaving v1\n"},
		{name: "two", reports: []report.Report{{Service: "a", Status: report.Serving}, {Service: "b", Status: report.Leaving}},
			want: "a serving\nb leaving\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Format(tc.reports)); got != tc.want {
				t.Fatalf("Format = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "servicename leaving v_3", "servicename serving v_3", "servicename", "web ok",
		"web v3", "web serving v1\r\napi leaving\r\n", "# c\n\nweb\nweb\n", "a\tb\tc\td",
		"web serving 1.2.3+build.7\n", "web\xff", strings.Repeat("x\n", 65),
	} {
		f.Add([]byte(seed))
	}
	const maxBody = 4096
	f.Fuzz(func(t *testing.T, body []byte) {
		reports, err := Parse(body, maxBody)
		if err != nil {
			if reports != nil {
				t.Fatalf("reports %v returned with error %v", reports, err)
			}
			return
		}
		if reports == nil {
			t.Fatal("accepted answer gave nil reports")
		}
		canon := Format(reports)
		again, err := Parse(canon, len(canon))
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, body, err)
		}
		if !reflect.DeepEqual(again, reports) {
			t.Fatalf("round trip of %q: %#v, want %#v", body, again, reports)
		}
		if !bytes.Equal(Format(again), canon) {
			t.Fatalf("Format is not stable for %q", body)
		}
	})
}
