package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// maxSkew is how far X-Pollbal-Timestamp may be from the backend's clock.
const maxSkew = 300 * time.Second

// verifySignature checks a /pool_warning request's timestamp and signature headers against
// secret. It is pure: now is the backend's clock.
func verifySignature(secret []byte, timestamp, signature string, body []byte, now time.Time) error {
	if timestamp == "" {
		return errors.New("missing X-Pollbal-Timestamp")
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("invalid X-Pollbal-Timestamp")
	}
	skew := now.Sub(time.Unix(ts, 0))
	if skew > maxSkew || skew < -maxSkew {
		return errors.New("X-Pollbal-Timestamp out of range")
	}
	hexSig, ok := strings.CutPrefix(signature, "sha256=")
	if !ok {
		return errors.New("missing or malformed X-Pollbal-Signature")
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return errors.New("malformed X-Pollbal-Signature")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte("\n"))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("bad X-Pollbal-Signature")
	}
	return nil
}
