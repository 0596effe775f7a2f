package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// signaturePrefix starts every X-Pollbal-Signature value; it names the algorithm.
const signaturePrefix = "sha256="

// Errors of Verify. They name the header at fault and never the secret or a correct signature.
var (
	errNoTimestamp        = errors.New("missing " + HeaderTimestamp)
	errBadTimestamp       = errors.New("invalid " + HeaderTimestamp)
	errTimestampSkew      = errors.New(HeaderTimestamp + " out of range")
	errNoSignature        = errors.New("missing or malformed " + HeaderSignature)
	errMalformedSignature = errors.New("malformed " + HeaderSignature)
	errBadSignature       = errors.New("bad " + HeaderSignature)
)

// Sign is the X-Pollbal-Signature value of body (exactly as sent, its final newline included)
// at timestamp (exactly the X-Pollbal-Timestamp value):
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "\n" + body)).
func Sign(secret []byte, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, timestamp, body))
}

// Verify checks a signed /pool_warning request: timestamp and signature are its
// X-Pollbal-Timestamp and X-Pollbal-Signature values, body its exact bytes. The timestamp must
// be within maxSkew of now (the verifier's clock), so that a recorded warning cannot be
// replayed later; the signature is compared in constant time. It is a pure function.
func Verify(secret []byte, timestamp, signature string, body []byte, now time.Time, maxSkew time.Duration) error {
	if timestamp == "" {
		return errNoTimestamp
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errBadTimestamp
	}
	skew := now.Sub(time.Unix(ts, 0))
	if skew > maxSkew || skew < -maxSkew {
		return errTimestampSkew
	}
	hexSig, ok := strings.CutPrefix(signature, signaturePrefix)
	if !ok {
		return errNoSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return errMalformedSignature
	}
	if !hmac.Equal(got, mac(secret, timestamp, body)) {
		return errBadSignature
	}
	return nil
}

// mac is HMAC-SHA256(secret, timestamp + "\n" + body).
func mac(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte("\n"))
	m.Write(body)
	return m.Sum(nil)
}
