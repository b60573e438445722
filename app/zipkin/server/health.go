package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
)

// health answers Zipkin's health document: 200 {"status":"UP",...} when the
// storage check and every check added with AddHealthCheck pass, 503 with
// "DOWN" and each failing component's (redacted) error while one does not.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), DefaultHealthTimeout)
	defer cancel()
	s.checksMu.Lock()
	checks := append([]healthCheck{{name: s.cfg.StorageName, check: s.store.Check}}, s.checks...)
	s.checksMu.Unlock()
	// Every check runs at once on the same deadline; one that has not answered by then is
	// reported DOWN, and its goroutine is left to finish into the buffered channel.
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(checks))
	for i, c := range checks {
		go func() { results <- result{i, c.check(ctx)} }()
	}
	errs := make([]error, len(checks))
	pending := len(checks)
	for pending > 0 {
		select {
		case res := <-results:
			errs[res.i] = res.err
			if res.err == nil {
				errs[res.i] = errAnswered
			}
			pending--
		case <-ctx.Done():
			for i := range errs {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("no answer within %v: %w", DefaultHealthTimeout, ctx.Err())
				}
			}
			pending = 0
		}
	}
	status, code := "UP", http.StatusOK
	details := make(map[string]any, len(checks))
	for i, c := range checks {
		component := map[string]any{"status": "UP"}
		if err := errs[i]; err != errAnswered {
			status, code = "DOWN", http.StatusServiceUnavailable
			component = map[string]any{"status": "DOWN", "error": s.ingest.redact(err.Error())}
		}
		if i == 0 && s.cfg.HealthDetails != nil {
			if d := s.cfg.HealthDetails(); len(d) > 0 {
				component["details"] = s.redactDetails(d)
			}
		}
		details[c.name] = component
	}
	doc := map[string]any{
		"status": status,
		"zipkin": map[string]any{
			"status":  status,
			"details": details,
		},
	}
	writeDoc(w, code, doc)
}

// errAnswered marks a health check that answered nil.
var errAnswered = errors.New("up")

// healthCheck is a component of /health besides the storage.
type healthCheck struct {
	name  string
	check func(context.Context) error
}

// AddHealthCheck adds a component to /health under name, as Zipkin lists
// its collectors (e.g. "KafkaCollector", "RabbitMQCollector") beside the
// storage: every /health request calls check, all checks and the storage's
// at once, with a context that ends after DefaultHealthTimeout; an error,
// or no answer by then, reports the component, and the whole document,
// "DOWN" with status 503. A check must be safe for concurrent use and
// should return when its context ends (one that does not is left running
// while /health answers). Adding a name already used (or the storage's) is
// an error.
func (s *Server) AddHealthCheck(name string, check func(ctx context.Context) error) error {
	if name == "" || check == nil {
		return errors.New("server: AddHealthCheck needs a name and a check")
	}
	s.checksMu.Lock()
	defer s.checksMu.Unlock()
	if name == s.cfg.StorageName || slices.ContainsFunc(s.checks, func(c healthCheck) bool { return c.name == name }) {
		return fmt.Errorf("server: health component %q is already reported", name)
	}
	s.checks = append(s.checks, healthCheck{name: name, check: check})
	return nil
}

// info answers Zipkin's /info ({"zipkin":{"version":...}}) plus Config.Info
// under "zipkin-mysql".
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
	}
	doc := map[string]any{"zipkin": map[string]any{"version": version}}
	if len(s.cfg.Info) > 0 {
		doc["zipkin-mysql"] = s.cfg.Info
	}
	writeDoc(w, http.StatusOK, doc)
}

func writeDoc(w http.ResponseWriter, code int, doc any) {
	b, err := json.Marshal(doc)
	if err != nil {
		textError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// redactDetails returns v with the configured secrets replaced in every
// string, through maps and slices.
func (s *Server) redactDetails(v any) any {
	switch v := v.(type) {
	case string:
		return s.ingest.redact(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = s.redactDetails(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = s.redactDetails(x)
		}
		return out
	case []map[string]any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = s.redactDetails(x)
		}
		return out
	}
	return v
}
