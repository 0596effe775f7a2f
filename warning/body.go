package warning

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Body is the /pool_warning body line for g, without the trailing newline:
// `<service> <version|-> serving=<n> leaving=<m> threshold=<t> site=<site>`.
func Body(g Group, site string) string {
	v := g.Version
	if v == "" {
		v = "-"
	}
	return fmt.Sprintf("%s %s serving=%d leaving=%d threshold=%d site=%s",
		g.Service, v, len(g.Serving), len(g.Leaving), g.Threshold, site)
}

// Signature is the X-Pollbal-Signature value for body (exactly as sent) at timestamp:
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "\n" + body)).
func Signature(secret []byte, timestamp, body string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte("\n"))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
