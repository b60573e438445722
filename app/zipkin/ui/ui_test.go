package ui_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/ui"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func checkSecurityHeaders(t *testing.T, path string, rec *httptest.ResponseRecorder) {
	t.Helper()
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("%s: Content-Security-Policy %q must allow only same-origin script", path, csp)
	}
	if !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("%s: Content-Security-Policy %q should default to 'none'", path, csp)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options = %q, want nosniff", path, got)
	}
}

func TestRoutes(t *testing.T) {
	h := ui.Handler()
	for _, tc := range []struct {
		path, ctype, contains string
		status                int
	}{
		{"/zipkin/", "text/html", `src="/zipkin/static/search.js"`, 200},
		{"/zipkin/index.html", "text/html", `src="/zipkin/static/search.js"`, 200},
		{"/zipkin/?serviceName=x", "text/html", `id="search-form"`, 200},
		{"/zipkin/traces/463ac35c9f6413ad", "text/html", `src="/zipkin/static/trace.js"`, 200},
		{"/zipkin/traces/anything", "text/html", `id="waterfall"`, 200},
		{"/zipkin/dependency", "text/html", `src="/zipkin/static/dependency.js"`, 200},
		{"/zipkin/config.json", "application/json", `"apiBase":"/api/v2"`, 200},
		{"/zipkin/static/common.js", "text/javascript", "export function el", 200},
		{"/zipkin/static/style.css", "text/css", ".waterfall", 200},
		{"/zipkin/static/favicon.svg", "image/svg+xml", "<svg", 200},
		{"/zipkin/static/missing.js", "text/plain", "not a page", 404},
		{"/zipkin/traces/", "text/plain", "not a page", 404},
		{"/zipkin/assets/search.html", "text/plain", "not a page", 404},
		{"/elsewhere", "text/plain", "under /zipkin/", 404},
	} {
		rec := get(t, h, http.MethodGet, tc.path, nil)
		if rec.Code != tc.status {
			t.Errorf("GET %s: status %d, want %d", tc.path, rec.Code, tc.status)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.ctype)
		}
		if body := rec.Body.String(); !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s: body does not contain %q", tc.path, tc.contains)
		}
		checkSecurityHeaders(t, tc.path, rec)
	}
}

func TestMethodsAndCaching(t *testing.T) {
	h := ui.Handler()
	rec := get(t, h, http.MethodPost, "/zipkin/", nil)
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /zipkin/: status %d Allow %q, want 405 and GET, HEAD", rec.Code, rec.Header().Get("Allow"))
	}
	checkSecurityHeaders(t, "POST /zipkin/", rec)

	rec = get(t, h, http.MethodHead, "/zipkin/static/trace.js", nil)
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, body %d bytes; want 200 and no body", rec.Code, rec.Body.Len())
	}
	etag := rec.Header().Get("ETag")
	if etag == "" || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("want an ETag and Cache-Control: no-cache, got %q %q", etag, rec.Header().Get("Cache-Control"))
	}
	rec = get(t, h, http.MethodGet, "/zipkin/static/trace.js", map[string]string{"If-None-Match": etag})
	if rec.Code != http.StatusNotModified {
		t.Errorf("conditional GET with the ETag: status %d, want 304", rec.Code)
	}
}

func TestAPIBase(t *testing.T) {
	for _, tc := range []struct {
		in, want, connect string
	}{
		{"", "/api/v2", "connect-src 'self';"},
		{"/zipkin/api/v2/", "/zipkin/api/v2", "connect-src 'self';"},
		{"http://zipkin.example:9411/api/v2", "http://zipkin.example:9411/api/v2", "connect-src 'self' http://zipkin.example:9411;"},
		{" https://z.example/api/v2/ ", "https://z.example/api/v2", "connect-src 'self' https://z.example;"},
	} {
		h, err := ui.New(ui.Options{APIBase: tc.in})
		if err != nil {
			t.Errorf("New(APIBase %q): %v", tc.in, err)
			continue
		}
		rec := get(t, h, http.MethodGet, "/zipkin/config.json", nil)
		var cfg struct {
			APIBase string `json:"apiBase"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &cfg); err != nil || cfg.APIBase != tc.want {
			t.Errorf("APIBase %q: config.json %s (%v), want apiBase %q", tc.in, rec.Body, err, tc.want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, tc.connect) {
			t.Errorf("APIBase %q: CSP %q does not contain %q", tc.in, csp, tc.connect)
		}
	}
	for _, bad := range []string{"api/v2", "ftp://x/api/v2", "http:///api/v2", "/api/v2?x=1", "javascript:alert(1)", "http://u:p@h/api/v2"} {
		if _, err := ui.New(ui.Options{APIBase: bad}); err == nil {
			t.Errorf("New(APIBase %q): no error", bad)
		}
		rec := get(t, ui.Handler(ui.Options{APIBase: bad}), http.MethodGet, "/zipkin/", nil)
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "APIBase") {
			t.Errorf("Handler(APIBase %q): status %d body %q, want 500 naming APIBase", bad, rec.Code, rec.Body)
		}
	}
	rec := get(t, ui.Handler(ui.Options{}, ui.Options{}), http.MethodGet, "/zipkin/", nil)
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("Handler with two Options: status %d, want 500", rec.Code)
	}
}

// TestAssetsStayText guards the rules the browser test cannot prove for
// every code path: no inline script in the pages, and no HTML parsing of
// strings in the scripts.
func TestAssetsStayText(t *testing.T) {
	inline := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|style\s*=|javascript:`)
	risky := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\('style'|setAttribute\("style"`)
	err := filepath.WalkDir("assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := string(b)
		switch filepath.Ext(p) {
		case ".html":
			if m := inline.FindString(s); m != "" {
				t.Errorf("%s: inline script or style %q", p, m)
			}
		case ".js":
			for i, line := range strings.Split(s, "\n") {
				code, _, _ := strings.Cut(line, "//")
				if m := risky.FindString(code); m != "" {
					t.Errorf("%s:%d: %s parses or runs strings; build DOM nodes with textContent", p, i+1, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHandlerOnMux(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/zipkin/", ui.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/zipkin") // the mux redirects to /zipkin/
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/zipkin/" || !strings.Contains(string(body), "search-form") {
		t.Errorf("GET /zipkin: status %d at %s", resp.StatusCode, resp.Request.URL.Path)
	}
}
