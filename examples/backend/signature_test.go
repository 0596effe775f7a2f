package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"testing"
	"time"
)

func sign(secret []byte, ts string, body string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "\n" + body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestVerifySignature(t *testing.T) {
	secret := []byte("s3cret")
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := "web v1 serving=1 leaving=0 threshold=1 site=test\n"
	tests := []struct {
		name      string
		timestamp string
		signature string
		body      string
		wantErr   bool
	}{
		{name: "valid", timestamp: ts, signature: sign(secret, ts, body), body: body},
		{name: "valid at +300s skew", timestamp: "1700000300", signature: sign(secret, "1700000300", body), body: body},
		{name: "valid at -300s skew", timestamp: "1699999700", signature: sign(secret, "1699999700", body), body: body},
		{name: "too old", timestamp: "1699999699", signature: sign(secret, "1699999699", body), body: body, wantErr: true},
		{name: "too far ahead", timestamp: "1700000301", signature: sign(secret, "1700000301", body), body: body, wantErr: true},
		{name: "missing timestamp", timestamp: "", signature: sign(secret, "", body), body: body, wantErr: true},
		{name: "non-numeric timestamp", timestamp: "now", signature: sign(secret, "now", body), body: body, wantErr: true},
		{name: "missing signature", timestamp: ts, signature: "", body: body, wantErr: true},
		{name: "no sha256 prefix", timestamp: ts, signature: sign(secret, ts, body)[len("sha256="):], body: body, wantErr: true},
		{name: "non-hex signature", timestamp: ts, signature: "sha256=zz", body: body, wantErr: true},
		{name: "wrong secret", timestamp: ts, signature: sign([]byte("other"), ts, body), body: body, wantErr: true},
		{name: "body changed", timestamp: ts, signature: sign(secret, ts, body), body: body + "x", wantErr: true},
		{name: "timestamp changed", timestamp: "1700000001", signature: sign(secret, ts, body), body: body, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := verifySignature(secret, tc.timestamp, tc.signature, []byte(tc.body), now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("verifySignature() error = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
