package protocol

import (
	"strings"
	"testing"
)

func TestWarningLine(t *testing.T) {
	tests := []struct {
		name string
		w    Warning
		want string
	}{
		{
			name: "versioned",
			w:    Warning{Service: "web", Version: "v3", Serving: 2, Leaving: 1, Threshold: 2, Site: "eu-west-1"},
			want: "web v3 serving=2 leaving=1 threshold=2 site=eu-west-1",
		},
		{
			name: "unversioned shows dash",
			w:    Warning{Service: "api", Serving: 1, Threshold: 1, Site: "s"},
			want: "api - serving=1 leaving=0 threshold=1 site=s",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.Line(); got != tc.want {
				t.Fatalf("Line() = %q, want %q", got, tc.want)
			}
			if got := tc.w.Body(); got != tc.want+"\n" {
				t.Fatalf("Body() = %q, want the line and a newline", got)
			}
		})
	}
}

func TestParseWarning(t *testing.T) {
	web := Warning{Service: "web", Version: "v1", Serving: 1, Threshold: 1, Site: "t"}
	tests := []struct {
		name    string
		body    string
		want    Warning
		wantErr string // "" = must succeed; else a part of the error text
	}{
		{name: "as sent", body: "web v1 serving=1 leaving=0 threshold=1 site=t\n", want: web},
		{name: "without the final newline", body: "web v1 serving=1 leaving=0 threshold=1 site=t", want: web},
		{name: "unversioned", body: "web - serving=2 leaving=0 threshold=2 site=t\n",
			want: Warning{Service: "web", Serving: 2, Threshold: 2, Site: "t"}},
		{name: "version with plus", body: "web 1.2.3+b7 serving=0 leaving=3 threshold=2 site=eu-west-1\n",
			want: Warning{Service: "web", Version: "1.2.3+b7", Leaving: 3, Threshold: 2, Site: "eu-west-1"}},
		{name: "nine-digit count", body: "web v1 serving=999999999 leaving=0 threshold=1 site=t",
			want: Warning{Service: "web", Version: "v1", Serving: 999999999, Threshold: 1, Site: "t"}},

		{name: "empty", body: "", wantErr: "want 6 space-separated fields, got 1"},
		{name: "two newlines", body: "web v1 serving=1 leaving=0 threshold=1 site=t\n\n", wantErr: `field 6`},
		{name: "CRLF", body: "web v1 serving=1 leaving=0 threshold=1 site=t\r\n", wantErr: `field 6`},
		{name: "two spaces", body: "web  v1 serving=1 leaving=0 threshold=1 site=t", wantErr: "got 7"},
		{name: "tab", body: "web\tv1 serving=1 leaving=0 threshold=1 site=t", wantErr: "got 5"},
		{name: "fields out of order", body: "web v1 leaving=0 serving=1 threshold=1 site=t", wantErr: "field 3: want serving=<count>"},
		{name: "negative count", body: "web v1 serving=-1 leaving=0 threshold=1 site=t", wantErr: "field 3"},
		{name: "empty count", body: "web v1 serving= leaving=0 threshold=1 site=t", wantErr: "field 3"},
		{name: "leading zero", body: "web v1 serving=01 leaving=0 threshold=1 site=t", wantErr: "field 3"},
		{name: "ten-digit count", body: "web v1 serving=1234567890 leaving=0 threshold=1 site=t", wantErr: "field 3"},
		{name: "bad service", body: "-web v1 serving=1 leaving=0 threshold=1 site=t", wantErr: `invalid service "-web"`},
		{name: "bad version", body: "web .v1 serving=1 leaving=0 threshold=1 site=t", wantErr: `invalid version ".v1"`},
		{name: "empty site", body: "web v1 serving=1 leaving=0 threshold=1 site=", wantErr: "field 6"},
		{name: "site with a plus", body: "web v1 serving=1 leaving=0 threshold=1 site=a+b", wantErr: "field 6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseWarning([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseWarning(%q) = %+v, %v; want an error with %q", tc.body, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseWarning(%q) = %+v, %v; want %+v", tc.body, got, err, tc.want)
			}
		})
	}
}

// FuzzParseWarning checks that ParseWarning accepts only what Body or Line writes, and that the
// Warning it reads is the one they wrote it from.
func FuzzParseWarning(f *testing.F) {
	for _, seed := range []string{
		"web v1 serving=1 leaving=0 threshold=1 site=t\n", "web - serving=2 leaving=0 threshold=2 site=t",
		"", "a b c d e f", "web v1 serving=01 leaving=0 threshold=1 site=t\n",
		"web v1 serving=1 leaving=0 threshold=1 site=t\r\n", "w\xff - serving=0 leaving=0 threshold=0 site=s\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w, err := ParseWarning(body)
		if err != nil {
			return
		}
		again, err := ParseWarning([]byte(w.Body()))
		if err != nil || again != w {
			t.Fatalf("ParseWarning(%q) = %+v, but its Body %q parses as %+v, %v", body, w, w.Body(), again, err)
		}
		if string(body) != w.Body() && string(body) != w.Line() {
			t.Fatalf("ParseWarning accepted %q, which Body would write as %q", body, w.Body())
		}
	})
}
