package balancer

import "strings"

// maxHostLen bounds the Host header the router looks at; longer hosts match only "*".
const maxHostLen = 255

// router maps a Host header to an app: exact names, then the longest "*." suffix, then "*".
// It is immutable and matching does not allocate.
type router struct {
	exact    map[string]*App
	wildcard map[string]*App // key: the suffix with its leading dot (".shop.example.com")
	star     *App
}

func newRouter(apps []*App) router {
	r := router{exact: map[string]*App{}, wildcard: map[string]*App{}}
	for _, a := range apps {
		for _, h := range a.Hosts {
			h = strings.ToLower(h)
			switch {
			case h == "*":
				r.star = a
			case strings.HasPrefix(h, "*."):
				r.wildcard[h[1:]] = a
			default:
				r.exact[h] = a
			}
		}
	}
	return r
}

// match finds the app for host. A "*.example.com" pattern matches any name with at least one
// more label in front of ".example.com", but not "example.com" itself.
func (r *router) match(host []byte) *App {
	host = stripPort(host)
	if len(host) > maxHostLen {
		return r.star
	}
	var buf [maxHostLen]byte
	n := copy(buf[:], host)
	for i := 0; i < n; i++ {
		if c := buf[i]; 'A' <= c && c <= 'Z' {
			buf[i] = c + ('a' - 'A')
		}
	}
	if n > 0 && buf[n-1] == '.' { // a fully qualified name matches like its plain form
		n--
	}
	h := buf[:n]
	if a := r.exact[string(h)]; a != nil {
		return a
	}
	if len(r.wildcard) > 0 {
		for i := 1; i < len(h); i++ { // longest suffix first: the first dot after a label
			if h[i] == '.' && i > 0 {
				if a := r.wildcard[string(h[i:])]; a != nil {
					return a
				}
			}
		}
	}
	return r.star
}

// stripPort removes a ":port" suffix, keeping bracketed IPv6 literals intact.
func stripPort(host []byte) []byte {
	for i := len(host) - 1; i >= 0; i-- {
		switch host[i] {
		case ':':
			return host[:i]
		case ']':
			return host
		}
		if host[i] < '0' || host[i] > '9' {
			return host
		}
	}
	return host
}
