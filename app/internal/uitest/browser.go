// Package uitest drives the trace viewer (package zipkin/ui) in headless
// Chromium and checks what a user sees. RunBrowserChecks works against any
// server that serves the viewer under /zipkin/ and a Zipkin /api/v2 where
// /zipkin/config.json says: the ui package's own test runs it against
// FakeAPI; the Zipkin server's test can run it against the real server and
// database after the checks post their spans through it.
//
// Chromium: the checks look for $SQLPOOL_CHROMIUM, then chromium,
// chromium-browser, google-chrome and headless-shell on PATH. When none is
// found they skip, unless SQLPOOL_REQUIRE_CHROMIUM=1 (CI), where they fail.
package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// RenderBudget is the longest a 2,000-span trace may take from navigation
// start to its last bar painted.
const RenderBudget = 5 * time.Second

// Options tunes RunBrowserChecksWith. The zero value writes no files.
type Options struct {
	// ScreenshotDir, when not empty, is the directory where the checks
	// write viewer-search.png, viewer-trace.png and viewer-dependencies.png
	// (1360×900 PNGs). It must exist.
	ScreenshotDir string
}

// RunBrowserChecks posts the fixture traces with post (nil posts them to the
// server's API with HTTP) and then checks the viewer at baseURL in headless
// Chromium: search, trace page, open-trace-ID box, dependencies, a
// 2,000-span trace within RenderBudget, untrusted text and a clean console.
// The store behind baseURL must be empty of other spans in the last hour,
// since the checks count results and dependency calls exactly.
func RunBrowserChecks(t *testing.T, baseURL string, post func(spans []byte)) {
	t.Helper()
	RunBrowserChecksWith(t, baseURL, post, Options{})
}

// ChromiumPath returns the browser the checks would use, or an error saying
// how to provide one.
func ChromiumPath() (string, error) {
	if p := os.Getenv("SQLPOOL_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SQLPOOL_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found on PATH (install Debian's chromium package: apt-get install chromium, or set SQLPOOL_CHROMIUM to a Chrome/Chromium binary)")
}

// RunBrowserChecksWith is RunBrowserChecks with options.
func RunBrowserChecksWith(t *testing.T, baseURL string, post func(spans []byte), opts Options) {
	t.Helper()
	exe, err := ChromiumPath()
	if err != nil {
		if os.Getenv("SQLPOOL_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("browser checks need Chromium and SQLPOOL_REQUIRE_CHROMIUM=1: %v", err)
		}
		t.Skipf("skipping browser checks: %v (set SQLPOOL_REQUIRE_CHROMIUM=1 to make this a failure)", err)
	}
	c := &checker{t: t, base: strings.TrimRight(baseURL, "/"), opts: opts}
	c.apiBase = c.readConfig()
	fx := newFixtures(time.Now())
	c.fx = fx
	for _, tr := range fx.all() {
		body, err := json.Marshal(tr)
		if err != nil {
			t.Fatalf("encoding fixture spans: %v", err)
		}
		if post != nil {
			post(body)
		} else {
			c.httpPost(body)
		}
	}
	c.waitStored()
	c.startBrowser(exe)

	t.Run("search", c.checkSearch)
	t.Run("trace", c.checkTrace)
	t.Run("trace-id-box", c.checkTraceIDBox)
	t.Run("dependencies", c.checkDependencies)
	t.Run("2000-spans", c.checkBigTrace)
	t.Run("not-found", c.checkNotFound)
}

type checker struct {
	t       *testing.T
	base    string // server root, no trailing slash
	apiBase string // absolute API base URL, no trailing slash
	opts    Options
	fx      *fixtures
	ctx     context.Context // the tab
	rec     *recorder
}

func (c *checker) readConfig() string {
	c.t.Helper()
	resp, err := http.Get(c.base + "/zipkin/config.json")
	if err != nil {
		c.t.Fatalf("GET /zipkin/config.json: %v", err)
	}
	defer resp.Body.Close()
	var cfg struct {
		APIBase string `json:"apiBase"`
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET /zipkin/config.json: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		c.t.Fatalf("decoding /zipkin/config.json: %v", err)
	}
	api := strings.TrimRight(cfg.APIBase, "/")
	if strings.HasPrefix(api, "/") || api == "" {
		api = c.base + api
	}
	return api
}

func (c *checker) httpPost(body []byte) {
	c.t.Helper()
	resp, err := http.Post(c.apiBase+"/spans", "application/json", bytes.NewReader(body))
	if err != nil {
		c.t.Fatalf("POST %s/spans: %v", c.apiBase, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("POST %s/spans: HTTP %d: %s", c.apiBase, resp.StatusCode, msg)
	}
}

// waitStored polls the API until every posted trace is readable in full,
// each span with the local service it was posted with. A Zipkin server may
// store asynchronously after answering 202, and Zipkin's MySQL store writes
// a span's zipkin_spans row before its zipkin_annotations rows (reference
// zipkin.md §2), from which both the local endpoint and the search indexes
// come: a trace whose spans read back without their services is not yet
// searchable.
func (c *checker) waitStored() {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, tr := range c.fx.all() {
		want := map[string]int{}
		for _, s := range tr {
			want[s.ID+" "+svc(s.LocalEndpoint)]++
		}
		for {
			got, err := c.readBack(tr[0].TraceID)
			if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("trace %s not stored within 60s: read back %d of %d spans with their services (last error: %v)",
					tr[0].TraceID, len(got), len(want), err)
			}
			time.Sleep(50 * time.Millisecond) // polling for the stored state of an external server
		}
	}
}

// readBack returns how many spans of the trace the API returns per span ID
// and local service ("<id> <service>").
func (c *checker) readBack(traceID string) (map[string]int, error) {
	resp, err := http.Get(c.apiBase + "/trace/" + traceID)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var spans []Span
	if err := json.NewDecoder(resp.Body).Decode(&spans); err != nil {
		return nil, err
	}
	got := map[string]int{}
	for _, s := range spans {
		got[s.ID+" "+svc(s.LocalEndpoint)]++
	}
	return got, nil
}

// recorder collects everything that counts as a page problem.
type recorder struct {
	mu       sync.Mutex
	problems []string
	urls     map[network.RequestID]string
	dialogs  chan string
}

func (r *recorder) add(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.problems
	r.problems = nil
	return p
}

func remoteText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		case a.Description != "":
			parts = append(parts, a.Description)
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

// listen runs on the tab's read loop: it must return fast and run no command.
func (r *recorder) listen(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			r.add("console.%s: %s", ev.Type, remoteText(ev.Args))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		r.add("uncaught exception at %s:%d: %s", d.URL, d.LineNumber+1, msg)
	case *log.EventEntryAdded:
		if ev.Entry != nil && ev.Entry.Level == log.EntryLevelError {
			r.add("browser error (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		if ev.Request != nil {
			r.urls[ev.RequestID] = ev.Request.URL
		}
	case *network.EventLoadingFailed:
		if !ev.Canceled {
			r.add("request failed: %s: %s %s", r.urls[ev.RequestID], ev.ErrorText, ev.BlockedReason)
		}
	case *network.EventResponseReceived:
		if ev.Response != nil && ev.Response.Status >= 400 {
			r.add("HTTP %d for %s", ev.Response.Status, ev.Response.URL)
		}
	case *page.EventJavascriptDialogOpening:
		r.add("a JavaScript %s dialog opened: %q (script ran from page data?)", ev.Type, ev.Message)
		select {
		case r.dialogs <- ev.Message:
		default:
		}
	}
}

func (c *checker) startBrowser(exe string) {
	t := c.t
	t.Helper()
	// Chromium (or its crash handler) may still write into the profile while
	// t.TempDir's cleanup runs; remove it ourselves and ignore errors.
	profile, err := os.MkdirTemp("", "sqlpool-chromium-")
	if err != nil {
		t.Fatalf("creating a Chromium profile directory: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1360, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-crash-reporter", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
	})
	c.rec = &recorder{urls: map[network.RequestID]string{}, dialogs: make(chan string, 16)}
	// The first action starts the browser and ties its life to the context
	// it gets, so that context has no deadline; a watchdog cancels it if
	// Chromium does not start in time (it can be slow on a loaded machine).
	watchdog := time.AfterFunc(90*time.Second, cancelTab)
	err = chromedp.Do(ctx)
	if !watchdog.Stop() {
		t.Fatalf("starting %s: it did not answer within 90s (%v)", exe, err)
	}
	if err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	if err := chromedp.Listen(ctx, c.rec.listen); err != nil {
		t.Fatalf("listening to the tab's events: %v", err)
	}
	// Dismiss dialogs so a script that ran anyway cannot block the page; the
	// recorder has already counted them as problems.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.rec.dialogs:
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}
		}
	}()
	c.ctx = ctx
	if err := c.do(30*time.Second, chromedp.EmulateViewport(1360, 900)); err != nil {
		t.Fatalf("setting the viewport: %v", err)
	}
}

// do runs actions with a per-call timeout; the browser outlives it.
func (c *checker) do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// eval evaluates a JavaScript expression and decodes its JSON value into T.
func eval[T any](c *checker, expr string) T {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		c.t.Fatalf("evaluating %q: %v", expr, err)
	}
	return v
}

// navigate loads a page and waits until the JavaScript condition holds.
func (c *checker) navigate(path, ready string) {
	c.t.Helper()
	if err := c.do(60*time.Second, chromedp.Navigate(c.base+path)); err != nil {
		c.t.Fatalf("navigating to %s: %v", path, err)
	}
	c.waitFor(ready, path)
}

// clickAndLoad clicks an element that causes a navigation and waits for
// the new page to be ready.
func (c *checker) clickAndLoad(sel, ready string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		c.t.Fatalf("clicking %s: %v", sel, err)
	}
	c.waitFor(ready, sel)
}

func (c *checker) waitFor(cond, what string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 70*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		state := eval[string](c, `(() => { const s = document.querySelector('.status.error, #search-status, #trace-status, #dep-status'); return location.href + ' — ' + (s ? s.textContent : ''); })()`)
		c.t.Fatalf("%s: waiting for %s: %v (page: %s; problems: %v)", what, cond, err, state, c.rec.take())
	}
}

// expectClean fails the test for every console error, exception, failed
// request or dialog seen since the last call.
func (c *checker) expectClean(page string) {
	c.t.Helper()
	for _, p := range c.rec.take() {
		c.t.Errorf("%s page: %s", page, p)
	}
}

func (c *checker) screenshot(name string) {
	c.t.Helper()
	if c.opts.ScreenshotDir == "" {
		return
	}
	c.screenshotTo(filepath.Join(c.opts.ScreenshotDir, "viewer-"+name+".png"))
}

// screenshotTo writes a PNG of the tab to p.
func (c *checker) screenshotTo(p string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		c.t.Fatalf("screenshot %s: %v", p, err)
	}
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		c.t.Fatalf("writing %s: %v", p, err)
	}
	c.t.Logf("wrote %s", p)
}

type resultRow struct {
	TraceID  string   `json:"traceId"`
	Spans    string   `json:"spans"`
	Error    bool     `json:"error"`
	Services []string `json:"services"`
	Root     string   `json:"root"`
}

const readResults = `[...document.querySelectorAll('#results > li.result')].map(li => ({
  traceId: li.dataset.traceId,
  spans: li.querySelector('.span-count').textContent,
  error: li.classList.contains('error') && !!li.querySelector('.err-badge'),
  services: [...li.querySelectorAll('.services .chip')].map(c => c.dataset.service),
  root: li.querySelector('.result-link').textContent,
}))`

const resultsDone = `document.getElementById('results')?.dataset.state === 'done'`

func ids(rows []resultRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.TraceID
	}
	return out
}

func (c *checker) checkSearch(t *testing.T) {
	c.t = t
	fx := c.fx
	c.navigate("/zipkin/", `document.body.dataset.servicesLoaded === 'true'`)
	if err := c.do(30*time.Second,
		chromedp.SetValue(chromedp.ID("f-serviceName"), "frontend"),
	); err != nil {
		t.Fatalf("filling the search form: %v", err)
	}
	c.clickAndLoad("#search-button", resultsDone)

	search := eval[string](c, `location.search`)
	if !strings.Contains(search, "serviceName=frontend") {
		t.Errorf("the query is not in the URL after searching: location.search = %q", search)
	}
	rows := eval[[]resultRow](c, readResults)
	// Newest first: the plain traces were posted 1, 2, 3 minutes ago, the
	// messy one 4 minutes ago.
	want := []string{fx.simple[2][0].TraceID, fx.simple[1][0].TraceID, fx.simple[0][0].TraceID, fx.messy[0].TraceID}
	if got := ids(rows); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("search serviceName=frontend: got traces %v, want newest first %v", got, want)
	}
	for _, r := range rows {
		if r.TraceID != fx.messy[0].TraceID {
			continue
		}
		if r.Spans != fmt.Sprintf("%d spans", len(fx.messy)) {
			t.Errorf("messy trace result shows %q, want %d spans", r.Spans, len(fx.messy))
		}
		if !r.Error {
			t.Errorf("messy trace result has no error mark")
		}
		if strings.Join(r.Services, ",") != "frontend,backend" {
			t.Errorf("messy trace result lists services %v, want [frontend backend]", r.Services)
		}
		if r.Root != "frontend: get /checkout" {
			t.Errorf("messy trace result root = %q, want %q", r.Root, "frontend: get /checkout")
		}
	}
	c.expectClean("search")
	c.screenshot("search")

	// Longest first, straight from a URL.
	c.navigate("/zipkin/?serviceName=frontend&lookback=3600000&limit=10&sort=longest", resultsDone)
	want = []string{fx.simple[0][0].TraceID, fx.messy[0].TraceID, fx.simple[2][0].TraceID, fx.simple[1][0].TraceID}
	if got := ids(eval[[]resultRow](c, readResults)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("sort=longest: got %v, want %v", got, want)
	}
	if v := eval[string](c, `document.getElementById('f-sort').value`); v != "longest" {
		t.Errorf("the form does not reflect sort=longest from the URL: %q", v)
	}

	// A tag query binds to one span of one service.
	c.navigate("/zipkin/?serviceName=backend&annotationQuery=user.comment&lookback=3600000", resultsDone)
	if got := ids(eval[[]resultRow](c, readResults)); len(got) != 1 || got[0] != fx.messy[0].TraceID {
		t.Errorf("annotationQuery=user.comment: got %v, want only %s", got, fx.messy[0].TraceID)
	}
	// The same tag asked of frontend: frontend's half of the shared span
	// (same ID, same row in Zipkin's MySQL store) did not record it.
	c.navigate("/zipkin/?serviceName=frontend&annotationQuery=user.comment&lookback=3600000", resultsDone)
	if got := ids(eval[[]resultRow](c, readResults)); len(got) != 0 {
		t.Errorf("serviceName=frontend&annotationQuery=user.comment: got %v, want none (only backend recorded that tag)", got)
	}
	c.expectClean("search (URL queries)")
}

type waterfallRow struct {
	Key       string  `json:"key"`
	ParentKey string  `json:"parentKey"`
	Depth     int     `json:"depth"`
	Error     bool    `json:"error"`
	Orphan    bool    `json:"orphan"`
	Notes     bool    `json:"notes"`
	Marker    bool    `json:"marker"`
	Untimed   bool    `json:"untimed"`
	Hidden    bool    `json:"hidden"`
	Left      float64 `json:"left"`
	Width     float64 `json:"width"`
}

const readRows = `[...document.querySelectorAll('#waterfall > .row')].map(r => {
  const b = r.querySelector('.bar');
  return {
    key: r.dataset.key, parentKey: r.dataset.parentKey, depth: Number(r.dataset.depth),
    error: r.classList.contains('error') && !!r.querySelector('.err-mark'),
    orphan: r.classList.contains('orphan'), notes: !!r.querySelector('.note-mark'),
    marker: b.classList.contains('marker'), untimed: b.classList.contains('untimed'),
    hidden: r.hidden, left: parseFloat(b.style.left) || 0, width: parseFloat(b.style.width) || 0,
  };
})`

const traceRendered = `document.getElementById('waterfall')?.dataset.state === 'rendered'`

func (c *checker) checkTrace(t *testing.T) {
	c.t = t
	fx := c.fx
	tid := fx.messy[0].TraceID
	c.navigate("/zipkin/?serviceName=frontend&lookback=3600000", resultsDone)
	c.clickAndLoad(fmt.Sprintf(`#results li[data-trace-id="%s"] a.result-link`, tid), traceRendered)
	if p := eval[string](c, `location.pathname`); p != "/zipkin/traces/"+tid {
		t.Errorf("the result link led to %s, want /zipkin/traces/%s", p, tid)
	}

	rows := eval[[]waterfallRow](c, readRows)
	want := expectedParentKeys(fx.messy)
	if len(rows) != len(fx.messy) {
		t.Errorf("trace page shows %d rows, want exactly the %d posted spans", len(rows), len(fx.messy))
	}
	byKey := map[string]waterfallRow{}
	for _, r := range rows {
		byKey[r.Key] = r
		wantParent, ok := want[r.Key]
		if !ok {
			t.Errorf("trace page shows a row %q that was not posted", r.Key)
			continue
		}
		if r.ParentKey != wantParent {
			t.Errorf("row %s is nested under %q, want %q", r.Key, r.ParentKey, wantParent)
		}
		wantDepth := 0
		if r.ParentKey != "" {
			wantDepth = byKey[r.ParentKey].Depth + 1 // parents come first in the drawing order
		}
		if r.Depth != wantDepth {
			t.Errorf("row %s is drawn at depth %d, want %d (one below its parent)", r.Key, r.Depth, wantDepth)
		}
		if r.Error != (r.Key == fx.query) {
			t.Errorf("row %s error mark = %v, want %v", r.Key, r.Error, r.Key == fx.query)
		}
	}
	for k := range want {
		if _, ok := byKey[k]; !ok {
			t.Errorf("posted span %s has no row", k)
		}
	}
	if r := byKey[fx.orphan]; !r.Orphan || r.Depth != 0 || !r.Notes {
		t.Errorf("orphan row %+v: want top level, marked orphan, with a note", r)
	}
	if r := byKey[fx.noDuration]; !r.Marker {
		t.Errorf("span without duration %+v: want a marker", r)
	}
	if r := byKey[fx.noTimestamp]; !r.Untimed || !r.Marker {
		t.Errorf("span without timestamp %+v: want an untimed marker", r)
	}
	// Clock skew: the server half (reported 80ms late) must be drawn inside
	// its client once corrected.
	client, server := byKey[fx.rpc], byKey[fx.rpc+"~s"]
	if server.Left < client.Left || server.Left+server.Width > client.Left+client.Width+0.01 || !server.Notes {
		t.Errorf("skewed server bar [%.2f%%, +%.2f%%] not inside its client [%.2f%%, +%.2f%%] with a note",
			server.Left, server.Width, client.Left, client.Width)
	}

	// Click the span carrying the XSS tag: its tags appear as text.
	if err := c.do(30*time.Second, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.row[data-key="%s~s"] .name`, fx.rpc)), chromedp.NodeVisible)); err != nil {
		t.Fatalf("clicking the server span: %v", err)
	}
	c.waitFor(`!document.getElementById('details').hidden && !!document.getElementById('details-tags')`, "span details")
	tags := eval[map[string]string](c, `Object.fromEntries([...document.querySelectorAll('#details-tags tr')].map(tr => [tr.querySelector('th').textContent, tr.querySelector('td').textContent]))`)
	if tags["user.comment"] != XSSValue || tags["http.status_code"] != "200" || len(tags) != 2 {
		t.Errorf("details tags = %q, want user.comment=%q and http.status_code=200", tags, XSSValue)
	}
	facts := eval[string](c, `document.getElementById('details-facts').textContent`)
	for _, s := range []string{fx.rpc, fx.root, "SERVER", "backend @ 10.0.0.2"} {
		if !strings.Contains(facts, s) {
			t.Errorf("span details %q do not show %q", facts, s)
		}
	}
	if n := eval[int](c, `document.querySelectorAll('img').length`); n != 0 {
		t.Errorf("the page has %d <img> elements: a tag value was parsed as HTML", n)
	}
	if n := eval[int](c, `document.querySelectorAll('#waterfall b, #details b').length`); n != 0 {
		t.Errorf("a span name with markup was parsed as HTML (%d <b> elements)", n)
	}
	if href, want := eval[string](c, `document.getElementById('raw-json').href`), c.apiBase+"/trace/"+tid; href != want {
		t.Errorf("raw JSON link = %q, want %q", href, want)
	}

	// Collapse the root's subtree, then expand everything.
	if err := c.do(30*time.Second, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.row[data-key="%s"] .toggle`, fx.root)))); err != nil {
		t.Fatalf("collapsing the root: %v", err)
	}
	c.waitFor(`[...document.querySelectorAll('#waterfall > .row')].every(r => r.hidden === (r.dataset.depth !== '0'))`, "collapsed root")
	if err := c.do(30*time.Second, chromedp.Click(chromedp.ID("expand-all"))); err != nil {
		t.Fatalf("expanding: %v", err)
	}
	c.waitFor(`[...document.querySelectorAll('#waterfall > .row')].every(r => !r.hidden)`, "expanded rows")

	// Leave the failing query selected for the screenshot.
	if err := c.do(30*time.Second, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.row[data-key="%s"] .name`, fx.query)))); err != nil {
		t.Fatalf("clicking the failing span: %v", err)
	}
	c.waitFor(`document.getElementById('details-title').textContent.includes('select cart')`, "details of the failing span")
	c.expectClean("trace")
	c.screenshot("trace")
}

func (c *checker) checkTraceIDBox(t *testing.T) {
	c.t = t
	tr := c.fx.simple[1]
	c.navigate("/zipkin/dependency", `['rendered', 'empty', 'error'].includes(document.getElementById('graph-wrap').dataset.state)`)
	// Upper case and spaces are tolerated, as Zipkin does.
	if err := c.do(30*time.Second, chromedp.SetValue(chromedp.ID("trace-id-input"), "  "+strings.ToUpper(tr[0].TraceID)+" ")); err != nil {
		t.Fatalf("typing a trace ID: %v", err)
	}
	c.clickAndLoad("#trace-id-form button", traceRendered)
	if got := eval[string](c, `document.querySelector('#fact-trace-id dd').textContent`); got != tr[0].TraceID {
		t.Errorf("opened trace %q, want %q", got, tr[0].TraceID)
	}
	if n := eval[int](c, `document.querySelectorAll('#waterfall > .row').length`); n != len(tr) {
		t.Errorf("opened trace shows %d rows, want %d", n, len(tr))
	}
	c.expectClean("trace via ID box")
}

type depRow struct {
	Parent string `json:"parent"`
	Child  string `json:"child"`
	Calls  string `json:"calls"`
	Errors string `json:"errors"`
	Label  string `json:"label"`
}

func (c *checker) checkDependencies(t *testing.T) {
	c.t = t
	c.navigate("/zipkin/dependency", `document.getElementById('graph-wrap').dataset.state === 'rendered'`)
	got := eval[[]depRow](c, `[...document.querySelectorAll('#dep-rows tr')].map(tr => {
  const label = [...document.querySelectorAll('#dep-graph text.edge-label')].find(t => t.dataset.parent === tr.dataset.parent && t.dataset.child === tr.dataset.child);
  return { parent: tr.dataset.parent, child: tr.dataset.child,
    calls: tr.querySelector('.calls').textContent, errors: tr.querySelector('.errors').textContent,
    label: label ? label.textContent : '' };
})`)
	var want []depRow
	for _, l := range c.fx.links {
		label := fmt.Sprintf("%d call%s", l.CallCount, plural(l.CallCount))
		if l.ErrorCount > 0 {
			label += fmt.Sprintf(" · %d error%s", l.ErrorCount, plural(l.ErrorCount))
		}
		want = append(want, depRow{l.Parent, l.Child, fmt.Sprint(l.CallCount), fmt.Sprint(l.ErrorCount), label})
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Parent+got[i].Child < got[j].Parent+got[j].Child })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dependency links shown:\n got %+v\nwant %+v", got, want)
	}
	nodes := eval[[]string](c, `[...document.querySelectorAll('#dep-graph g.node')].map(g => g.dataset.service).sort()`)
	if strings.Join(nodes, ",") != "backend,frontend,mysql" {
		t.Errorf("graph nodes = %v, want [backend frontend mysql]", nodes)
	}
	if n := eval[int](c, `document.querySelectorAll('#dep-graph path.edge').length`); n != len(want) {
		t.Errorf("graph has %d edges, want %d", n, len(want))
	}
	c.expectClean("dependencies")
	c.screenshot("dependencies")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (c *checker) checkBigTrace(t *testing.T) {
	c.t = t
	tid := c.fx.big[0].TraceID
	// The budget is for one load; on a loaded machine a load can be slowed
	// by other processes, so up to three loads are measured and the best
	// one is held to the budget. Every figure is logged.
	var best time.Duration = -1
	for attempt := 1; attempt <= 3; attempt++ {
		start := time.Now()
		c.navigate("/zipkin/traces/"+tid+"?attempt="+fmt.Sprint(attempt), traceRendered)
		wall := time.Since(start)
		inPage := time.Duration(eval[float64](c, `Number(document.getElementById('waterfall').dataset.renderMs)`)) * time.Millisecond
		bars := eval[int](c, `document.querySelectorAll('#waterfall > .row .bar').length`)
		last := eval[bool](c, `(() => { const rows = document.querySelectorAll('#waterfall > .row'); const b = rows[rows.length - 1].querySelector('.bar'); return b.getBoundingClientRect().width > 0; })()`)
		if bars != bigSpans || !last {
			t.Fatalf("2,000-span trace drew %d bars (last bar laid out: %v), want %d", bars, last, bigSpans)
		}
		phases := eval[string](c, `(() => {
  const d = document.getElementById('waterfall').dataset;
  const e = performance.getEntriesByType('resource').find(e => e.name.includes('/trace/'));
  return 'spans fetched at ' + d.fetchedMs + 'ms (API request ' + (e ? Math.round(e.responseEnd - e.startTime) : '?') + 'ms), model built at ' + d.modelMs + 'ms, DOM built at ' + d.domMs + 'ms';
})()`)
		t.Logf("2,000-span trace, load %d: navigation start → last bar painted %v in the page (%s); %v measured from Go, including CDP round trips",
			attempt, inPage, phases, wall.Round(time.Millisecond))
		if best < 0 || inPage < best {
			best = inPage
		}
		if inPage <= RenderBudget {
			break
		}
	}
	if best > RenderBudget {
		t.Errorf("2,000-span trace took %v at best to render, budget %v", best, RenderBudget)
	}
	c.expectClean("2,000-span trace")
}

func (c *checker) checkNotFound(t *testing.T) {
	c.t = t
	missing := randomID()
	c.navigate("/zipkin/traces/"+missing, `document.getElementById('waterfall').dataset.state === 'notfound'`)
	if title := eval[string](c, `document.getElementById('trace-title').textContent`); title != "Trace not found" {
		t.Errorf("missing trace title = %q, want %q", title, "Trace not found")
	}
	// The API's 404 is the only problem expected here.
	for _, p := range c.rec.take() {
		if !strings.Contains(p, "404") {
			t.Errorf("not-found page: unexpected %s", p)
		}
	}
	c.navigate("/zipkin/traces/not-hex", `document.getElementById('waterfall').dataset.state === 'error'`)
	if msg := eval[string](c, `document.getElementById('trace-status').textContent`); !strings.Contains(msg, "not a trace ID") {
		t.Errorf("bad trace ID message = %q", msg)
	}
	c.expectClean("bad trace ID")
}
