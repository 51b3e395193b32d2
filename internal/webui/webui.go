// Package webui serves the Convene web app (web/, built by `make build`
// into dist/ and embedded in the binary). Paths that name a file get it;
// every other path gets index.html, so the app's own routes (/join/…,
// /s/…) load it. Nothing is fetched from outside the node, and the
// Content-Security-Policy says so to the browser.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// csp allows the app's own files, media from getUserMedia and WebRTC
// (blob:), and connections back to the node only — and, in a cluster, to
// the other nodes' origins (cspFor), which a page whose node died asks
// whether they answer before it rejoins on one.
const (
	cspHead = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
		"media-src 'self' blob: mediastream:; connect-src 'self' ws: wss:"
	cspTail = "; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
	csp     = cspHead + cspTail
)

// maxPeerOrigins bounds the other nodes' origins a page may connect to.
const maxPeerOrigins = 32

// cspFor is the policy with the origins of peers added to connect-src:
// each must be a plain http(s) origin (scheme, host, port; nothing a
// policy could read as more), others are left out.
func cspFor(peers []string) string {
	var b strings.Builder
	b.WriteString(cspHead)
	n := 0
	for _, p := range peers {
		if n < maxPeerOrigins && plainOrigin(p) {
			b.WriteString(" " + p)
			n++
		}
	}
	b.WriteString(cspTail)
	return b.String()
}

// plainOrigin reports whether o is http(s)://host[:port], host made of
// letters, digits, '.', '-', or an [IPv6] address.
func plainOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || len(o) > 200 {
		return false
	}
	for _, c := range u.Host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]", c)) {
			return false
		}
	}
	return u.Scheme+"://"+u.Host == o
}

// Built reports whether the embedded app was built (dist has index.html).
func Built() bool {
	_, err := fs.Stat(dist, "dist/index.html")
	return err == nil
}

// Handler returns the web app, or nil if the binary was built without it.
func Handler() http.Handler { return HandlerWith(nil) }

// HandlerWith is Handler whose pages may also connect to the origins peers
// returns (the cluster's other nodes; nil: none).
func HandlerWith(peers func() []string) http.Handler {
	if !Built() {
		return nil
	}
	sub, _ := fs.Sub(dist, "dist")
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if peers != nil {
			h.Set("Content-Security-Policy", cspFor(peers()))
		} else {
			h.Set("Content-Security-Policy", csp)
		}
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		p := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if p != "" {
			if st, err := fs.Stat(sub, p); err == nil && !st.IsDir() {
				if strings.HasPrefix(p, "assets/") {
					h.Set("Cache-Control", "public, max-age=31536000, immutable") // hashed names
				}
				files.ServeHTTP(w, r)
				return
			}
			if path.Ext(p) != "" && !strings.HasPrefix(p, "join/") && !strings.HasPrefix(p, "s/") {
				http.NotFound(w, r)
				return
			}
		}
		h.Set("Cache-Control", "no-cache")
		b, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			http.Error(w, "the web app is not built", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	})
}
