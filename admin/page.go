package admin

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"pollbal/configs"
	"pollbal/internal/alarms"
	"pollbal/internal/store"
)

//go:embed status.html
var pageFS embed.FS

// maxPageEvents is how many recent events the status page lists.
const maxPageEvents = 100

// pageView is what the status page template renders.
type pageView struct {
	State     State
	Store     store.Status // where admin moves are kept
	Pools     []poolView
	Events    []alarms.Event
	PoolNames []string // suggestions for the move form
	Ready     int      // backends ready
	Warned    int      // backends warned
	Generated string
	RefreshMS int64
	// RefreshSeconds is the <noscript> fallback's meta refresh, whole seconds (at least 1).
	RefreshSeconds int64
	RefreshText    string // for people: "2s"
	Nonce          string
}

// poolView is one node pool with its backends' states, in the pool's (id) order.
type poolView struct {
	PoolState
	Members    []BackendState
	Unassigned bool
}

func parsePage() (*template.Template, error) {
	t, err := template.New("status.html").Funcs(template.FuncMap{
		"join":  strings.Join,
		"clock": func(t time.Time) string { return t.UTC().Format("15:04:05") },
		"stamp": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"short": shortTime,
	}).ParseFS(pageFS, "status.html")
	if err != nil {
		return nil, fmt.Errorf("admin: parse status page: %w", err)
	}
	return t, nil
}

// shortTime turns an RFC 3339 time into its clock part; anything else is shown as it is.
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("15:04:05")
}

// shortDuration writes d without zero tails: 1h rather than 1h0m0s, 2m rather than 2m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// buildView arranges a state for the page: each pool with its members, default first and
// unassigned last (the order of State.Pools).
func buildView(st State, now time.Time, refresh time.Duration) pageView {
	v := pageView{
		State:          st,
		Events:         st.Events,
		Generated:      now.UTC().Format("2006-01-02 15:04:05 UTC"),
		RefreshMS:      refresh.Milliseconds(),
		RefreshSeconds: max(1, int64(refresh.Round(time.Second)/time.Second)),
		RefreshText:    shortDuration(refresh),
	}
	if len(v.Events) > maxPageEvents {
		v.Events = v.Events[:maxPageEvents]
	}
	byID := make(map[string]BackendState, len(st.Backends))
	for _, b := range st.Backends {
		byID[b.ID] = b
		if b.Ready {
			v.Ready++
		}
		if b.Warned {
			v.Warned++
		}
	}
	for _, p := range st.Pools {
		pv := poolView{PoolState: p, Unassigned: p.Name == configs.PoolUnassigned}
		for _, id := range p.Backends {
			if b, ok := byID[id]; ok {
				pv.Members = append(pv.Members, b)
			}
		}
		v.Pools = append(v.Pools, pv)
		v.PoolNames = append(v.PoolNames, p.Name)
	}
	return v
}

// nonce returns a fresh CSP nonce for the page's inline script. It is URL-safe base64: a "+"
// would come out of html/template escaped and no longer match the header.
func nonce() string {
	var b [18]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *Server) serveStatusPage(w http.ResponseWriter, _ *http.Request) {
	v := buildView(s.state(), time.Now(), s.refresh)
	v.Store = s.store.Status()
	v.Nonce = nonce()
	var buf bytes.Buffer
	if err := s.page.Execute(&buf, v); err != nil {
		s.log.Error("render status page", "err", err)
		writeText(w, http.StatusInternalServerError, "cannot render the status page\n")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "+
		"script-src 'nonce-"+v.Nonce+"'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	_, _ = w.Write(buf.Bytes())
}
