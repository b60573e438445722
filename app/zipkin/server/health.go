package server

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime/debug"
	"strconv"
)

// health answers Zipkin's health document: 200 {"status":"UP",...} when the
// storage check passes, 503 with "DOWN" and the (redacted) error while it
// does not.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), DefaultHealthTimeout)
	defer cancel()
	component := map[string]any{"status": "UP"}
	status, code := "UP", http.StatusOK
	if err := s.store.Check(ctx); err != nil {
		status, code = "DOWN", http.StatusServiceUnavailable
		component = map[string]any{"status": "DOWN", "error": s.ingest.redact(err.Error())}
	}
	if s.cfg.HealthDetails != nil {
		if d := s.cfg.HealthDetails(); len(d) > 0 {
			component["details"] = s.redactDetails(d)
		}
	}
	doc := map[string]any{
		"status": status,
		"zipkin": map[string]any{
			"status":  status,
			"details": map[string]any{s.cfg.StorageName: component},
		},
	}
	writeDoc(w, code, doc)
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
