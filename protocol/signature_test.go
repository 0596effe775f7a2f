package protocol

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sign computes a signature independently of Sign and Verify, so that a bug shared by both
// cannot hide.
func sign(secret []byte, ts string, body string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "\n" + body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

const testSkew = 300 * time.Second

func TestSign(t *testing.T) {
	tests := []struct {
		name      string
		secret    string
		timestamp string
		body      string
	}{
		{name: "warning body", secret: "s3cret", timestamp: "1700000000", body: "web v1 serving=1 leaving=0 threshold=1 site=test\n"},
		{name: "empty body", secret: "s3cret", timestamp: "1700000000", body: ""},
		{name: "empty secret", secret: "", timestamp: "1", body: "x\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := Sign([]byte(tc.secret), tc.timestamp, []byte(tc.body)), sign([]byte(tc.secret), tc.timestamp, tc.body); got != want {
				t.Fatalf("Sign = %s, want %s", got, want)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	secret := []byte("s3cret")
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := "web v1 serving=1 leaving=0 threshold=1 site=test\n"
	tests := []struct {
		name      string
		timestamp string
		signature string
		body      string
		wantErr   error // nil: accepted
	}{
		{name: "valid", timestamp: ts, signature: sign(secret, ts, body), body: body},
		{name: "valid with upper-case hex", timestamp: ts, signature: "sha256=" + strings.ToUpper(sign(secret, ts, body)[len("sha256="):]), body: body},
		{name: "valid at +300s skew", timestamp: "1700000300", signature: sign(secret, "1700000300", body), body: body},
		{name: "valid at -300s skew", timestamp: "1699999700", signature: sign(secret, "1699999700", body), body: body},
		{name: "too old", timestamp: "1699999699", signature: sign(secret, "1699999699", body), body: body, wantErr: errTimestampSkew},
		{name: "too far ahead", timestamp: "1700000301", signature: sign(secret, "1700000301", body), body: body, wantErr: errTimestampSkew},
		{name: "missing timestamp", timestamp: "", signature: sign(secret, "", body), body: body, wantErr: errNoTimestamp},
		{name: "non-numeric timestamp", timestamp: "now", signature: sign(secret, "now", body), body: body, wantErr: errBadTimestamp},
		{name: "missing signature", timestamp: ts, signature: "", body: body, wantErr: errNoSignature},
		{name: "no sha256 prefix", timestamp: ts, signature: sign(secret, ts, body)[len("sha256="):], body: body, wantErr: errNoSignature},
		{name: "non-hex signature", timestamp: ts, signature: "sha256=zz", body: body, wantErr: errMalformedSignature},
		{name: "wrong secret", timestamp: ts, signature: sign([]byte("other"), ts, body), body: body, wantErr: errBadSignature},
		{name: "body changed", timestamp: ts, signature: sign(secret, ts, body), body: body + "x", wantErr: errBadSignature},
		{name: "final newline dropped", timestamp: ts, signature: sign(secret, ts, body), body: strings.TrimSuffix(body, "\n"), wantErr: errBadSignature},
		{name: "timestamp changed", timestamp: "1700000001", signature: sign(secret, ts, body), body: body, wantErr: errBadSignature},
		{name: "truncated signature", timestamp: ts, signature: sign(secret, ts, body)[:21], body: body, wantErr: errBadSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(secret, tc.timestamp, tc.signature, []byte(tc.body), now, testSkew)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Verify() error = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// FuzzVerify checks Verify against Sign: whatever it is given, it accepts only a signature
// that Sign would write (hex case aside) for a timestamp within the skew; Sign's own signature
// fails only on the timestamp; and it never accepts it for another body.
func FuzzVerify(f *testing.F) {
	f.Add("1700000000", "sha256=00", []byte("web v1 serving=1 leaving=0 threshold=1 site=test\n"))
	f.Add("", "", []byte(""))
	f.Add("-1", "sha256=", []byte("x"))
	f.Add("99999999999999999999", "sha256=zz", []byte("\n"))
	secret := []byte("s3cret")
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, timestamp, signature string, body []byte) {
		want := Sign(secret, timestamp, body)
		if err := Verify(secret, timestamp, signature, body, now, testSkew); err == nil && !strings.EqualFold(signature, want) {
			t.Fatalf("Verify accepted %q for timestamp %q and body %q; Sign gives %q", signature, timestamp, body, want)
		}
		err := Verify(secret, timestamp, want, body, now, testSkew)
		if err != nil && !errors.Is(err, errNoTimestamp) && !errors.Is(err, errBadTimestamp) && !errors.Is(err, errTimestampSkew) {
			t.Fatalf("Verify rejected Sign's own signature for timestamp %q and body %q: %v", timestamp, body, err)
		}
		if err != nil {
			return
		}
		other := append(bytes.Clone(body), '!')
		if Verify(secret, timestamp, want, other, now, testSkew) == nil {
			t.Fatalf("Verify accepted the signature of %q for %q", body, other)
		}
	})
}
