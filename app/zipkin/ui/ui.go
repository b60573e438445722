// Package ui serves the trace viewer: a search page, a trace page (waterfall
// timeline) and a dependency graph page at /zipkin/, all built from files
// compiled into the binary with embed. The pages are plain HTML, CSS and
// JavaScript modules with no build step and no third-party code, and they
// read data only through the public Zipkin /api/v2 endpoints, so they work
// against any Zipkin-compatible server.
//
// Mount the handler on /zipkin/:
//
//	mux.Handle("/zipkin/", ui.Handler())
//
// The pages find the API through /zipkin/config.json, which the handler
// serves from [Options.APIBase]. See docs/viewer.md for the pages and how to
// point them at another server.
//
// Every response carries a Content-Security-Policy that allows scripts,
// styles and images from the serving origin only and no inline script, plus
// X-Content-Type-Options: nosniff. Span names, tags and service names are
// untrusted data: the scripts write them into the page only as text.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// Prefix is the path under which the handler serves the viewer. A request
// whose path does not start with it gets 404.
const Prefix = "/zipkin/"

// DefaultAPIBase is the API base the pages use when Options.APIBase is
// empty: the Zipkin v2 API on the same origin as the pages.
const DefaultAPIBase = "/api/v2"

//go:embed assets
var assets embed.FS

// Options configures the viewer. The zero value serves pages that call the
// API at DefaultAPIBase on the same origin.
type Options struct {
	// APIBase is where the pages send their /api/v2 requests: either an
	// absolute path on the serving origin, such as "/api/v2" or
	// "/zipkin/api/v2", or an absolute http or https URL of another
	// Zipkin-compatible server, such as "http://zipkin.example:9411/api/v2".
	// A trailing slash is removed. For another origin the handler adds that
	// origin to the Content-Security-Policy's connect-src, and that server
	// must allow cross-origin GET requests (Zipkin does by default).
	// Empty means DefaultAPIBase.
	APIBase string
}

// file is one embedded asset, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

type handler struct {
	files  map[string]file // keyed by path relative to assets/, e.g. "static/app.css"
	config file
	csp    string
}

// New returns the viewer handler for opts, or an error saying what is wrong
// with opts. Use it where a bad setting should stop the program at start-up,
// for example when APIBase comes from a command-line flag.
func New(opts Options) (http.Handler, error) {
	base, origin, err := normalizeAPIBase(opts.APIBase)
	if err != nil {
		return nil, err
	}
	h := &handler{files: map[string]file{}}
	err = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		h.files[strings.TrimPrefix(p, "assets/")] = newFile(body, contentType(p))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ui: reading embedded assets: %w", err)
	}
	cfg, err := json.Marshal(struct {
		APIBase string `json:"apiBase"`
	}{base})
	if err != nil {
		return nil, fmt.Errorf("ui: encoding config.json: %w", err)
	}
	h.config = newFile(cfg, "application/json; charset=utf-8")
	connect := "'self'"
	if origin != "" {
		connect += " " + origin
	}
	h.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src " + connect + "; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	return h, nil
}

// Handler returns the viewer handler. It takes at most one Options value;
// with none it uses the zero Options (API at DefaultAPIBase, same origin).
// If the options are invalid (see New) every request gets a 500 response
// whose body says what is wrong; call New to catch that at start-up instead.
func Handler(opts ...Options) http.Handler {
	var o Options
	if len(opts) > 1 {
		return errorHandler(errors.New("ui: Handler takes at most one Options value"))
	}
	if len(opts) == 1 {
		o = opts[0]
	}
	h, err := New(o)
	if err != nil {
		return errorHandler(err)
	}
	return h
}

func errorHandler(err error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header(), "default-src 'none'")
		http.Error(w, err.Error()+" (the viewer is misconfigured; fix ui.Options and restart)", http.StatusInternalServerError)
	})
}

// normalizeAPIBase validates base and returns it without a trailing slash,
// plus the origin to allow in connect-src when it names another server.
func normalizeAPIBase(base string) (normalized, origin string, err error) {
	base = strings.TrimSpace(base)
	if base == "" {
		return DefaultAPIBase, "", nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", "", fmt.Errorf("ui: APIBase %q is not a URL: %v; use a path like /api/v2 or a URL like http://host:9411/api/v2", base, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("ui: APIBase %q must not contain a query, fragment or user info; use a path like /api/v2 or a URL like http://host:9411/api/v2", base)
	}
	switch {
	case u.Scheme == "" && u.Host == "":
		if !strings.HasPrefix(u.Path, "/") {
			return "", "", fmt.Errorf("ui: APIBase %q must be an absolute path (starting with /) or an http(s) URL", base)
		}
	case u.Scheme == "http" || u.Scheme == "https":
		if u.Host == "" {
			return "", "", fmt.Errorf("ui: APIBase %q has no host", base)
		}
		origin = u.Scheme + "://" + u.Host
	default:
		return "", "", fmt.Errorf("ui: APIBase %q must be an absolute path or an http(s) URL, not scheme %q", base, u.Scheme)
	}
	// The pages append paths such as "/services"; "/" (API at the root of
	// this origin) becomes "".
	return strings.TrimRight(base, "/"), origin, nil
}

func newFile(body []byte, ct string) file {
	sum := sha256.Sum256(body)
	return file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".json":
		return "application/json; charset=utf-8"
	default:
		return "application/octet-stream"
	}
}

func setSecurityHeaders(h http.Header, csp string) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header(), h.csp)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed: the viewer serves only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.Error(w, "not found: the viewer serves paths under "+Prefix, http.StatusNotFound)
		return
	}
	var f file
	switch {
	case rest == "" || rest == "index.html":
		f, ok = h.files["search.html"]
	case rest == "dependency" || rest == "dependency/":
		f, ok = h.files["dependency.html"]
	case strings.HasPrefix(rest, "traces/") && len(rest) > len("traces/"):
		// The page reads the trace ID from its own URL and validates it.
		f, ok = h.files["trace.html"]
	case rest == "config.json":
		f, ok = h.config, true
	case strings.HasPrefix(rest, "static/"):
		f, ok = h.files[rest]
	default:
		ok = false
	}
	if !ok {
		http.Error(w, "not found: "+r.URL.Path+" is not a page of the trace viewer; start at "+Prefix, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
