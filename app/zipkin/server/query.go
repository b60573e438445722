package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// badRequest is an invalid query parameter; its message is answered with
// 400, as Zipkin answers an IllegalArgumentException.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func bad(msg string) error { return &badRequest{msg} }

// notFound is answered with 404 and its message.
type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }

// cacheNames is Zipkin's Cache-Control for name lists that are worth
// caching.
const cacheNames = "max-age=300, must-revalidate"

type queryFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request) error

// query runs a query handler within QueryTimeout and maps its error: a bad
// parameter or *model.QueryError → 400 with the message, not found → 404,
// the timeout → 500 naming RequestTimeoutException (as Zipkin's body does),
// anything else → 500 with the (redacted) message.
func (s *Server) query(f queryFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
		defer cancel()
		err := f(ctx, w, r)
		if err == nil {
			return
		}
		var br *badRequest
		var qe *model.QueryError
		var nf *notFound
		switch {
		case errors.As(err, &br), errors.As(err, &qe):
			textError(w, http.StatusBadRequest, err.Error())
		case errors.As(err, &nf):
			textError(w, http.StatusNotFound, err.Error())
		case errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil:
			s.log.Warn("query timed out", "path", r.URL.Path, "query", r.URL.RawQuery, "timeout", s.cfg.QueryTimeout)
			textError(w, http.StatusInternalServerError, "RequestTimeoutException: the query did not finish within "+
				s.cfg.QueryTimeout.String()+"; narrow it (shorter lookback, a service name, a lower limit)")
		case r.Context().Err() != nil:
			// The client went away; nobody reads an answer.
		default:
			msg := s.ingest.redact(err.Error())
			s.log.Error("query failed", "path", r.URL.Path, "query", r.URL.RawQuery, "err", msg)
			textError(w, http.StatusInternalServerError, msg)
		}
	}
}

// writeJSON answers 200 with a JSON body and its length.
func writeJSON(w http.ResponseWriter, body []byte, cacheControl string) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if cacheControl != "" {
		h.Set("Cache-Control", cacheControl)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

func writeStrings(w http.ResponseWriter, names []string, cacheControl string) error {
	return writeJSON(w, codec.AppendStrings(nil, names), cacheControl)
}

// param returns a query parameter and whether it was present and non-empty.
func param(r *http.Request, name string) (string, bool) {
	v := r.URL.Query().Get(name)
	return v, v != ""
}

func requiredParam(r *http.Request, name string) (string, error) {
	v, ok := param(r, name)
	if !ok {
		return "", bad("Mandatory parameter is missing: " + name)
	}
	return v, nil
}

// int64Param parses an optional integer parameter; absent gives def.
func int64Param(r *http.Request, name string, def int64) (int64, error) {
	v, ok := param(r, name)
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, bad(`For input string: "` + v + `" (parameter ` + name + ")")
	}
	return n, nil
}

func (s *Server) namesCache() string {
	if s.manyNames.Load() {
		return cacheNames
	}
	return ""
}

func (s *Server) getServices(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	names, err := s.store.GetServiceNames(ctx)
	if err != nil {
		return err
	}
	s.manyNames.Store(len(names) > 3)
	return writeStrings(w, names, s.namesCache())
}

func (s *Server) getSpanNames(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	svc, err := requiredParam(r, "serviceName")
	if err != nil {
		return err
	}
	names, err := s.store.GetSpanNames(ctx, strings.ToLower(strings.TrimSpace(svc)))
	if err != nil {
		return err
	}
	return writeStrings(w, names, s.namesCache())
}

func (s *Server) getRemoteServices(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	svc, err := requiredParam(r, "serviceName")
	if err != nil {
		return err
	}
	names, err := s.store.GetRemoteServiceNames(ctx, strings.ToLower(strings.TrimSpace(svc)))
	if err != nil {
		return err
	}
	return writeStrings(w, names, s.namesCache())
}

func (s *Server) getTraces(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	q := model.QueryRequest{}
	q.ServiceName, _ = param(r, "serviceName")
	q.RemoteServiceName, _ = param(r, "remoteServiceName")
	q.SpanName, _ = param(r, "spanName")
	if aq, ok := param(r, "annotationQuery"); ok {
		q.AnnotationQuery = model.ParseAnnotationQuery(aq)
	}
	var err error
	if q.MinDuration, err = int64Param(r, "minDuration", 0); err != nil {
		return err
	}
	if q.MaxDuration, err = int64Param(r, "maxDuration", 0); err != nil {
		return err
	}
	if q.EndTs, err = int64Param(r, "endTs", s.cfg.now().UnixMilli()); err != nil {
		return err
	}
	if q.Lookback, err = int64Param(r, "lookback", s.cfg.DefaultLookback); err != nil {
		return err
	}
	limit, err := int64Param(r, "limit", model.DefaultLimit)
	if err != nil {
		return err
	}
	if limit > math.MaxInt32 || limit < math.MinInt32 {
		// Zipkin's limit is a Java int: a value past it fails to parse.
		v, _ := param(r, "limit")
		return bad(`For input string: "` + v + `" (parameter limit)`)
	}
	q.Limit = int(limit)
	// Zipkin's minDuration and maxDuration are optional: a value given is
	// checked even when it is 0, which the request's zero value means
	// "no bound". Negative values make Normalize give Zipkin's messages
	// ("minDuration <= 0", "maxDuration is only valid with minDuration",
	// "maxDuration < minDuration").
	if _, ok := param(r, "minDuration"); ok && q.MinDuration == 0 {
		q.MinDuration = -1
	}
	if _, ok := param(r, "maxDuration"); ok && q.MaxDuration == 0 {
		q.MaxDuration = -1
	}
	if err := q.Normalize(); err != nil {
		return err
	}
	traces, err := s.store.GetTraces(ctx, q)
	if err != nil {
		return err
	}
	return writeJSON(w, codec.AppendJSONV2Traces(nil, traces), "")
}

func (s *Server) getTrace(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	raw := strings.TrimSpace(r.PathValue("traceId"))
	id, err := model.ParseTraceID(raw)
	if err != nil {
		return bad(err.Error())
	}
	spans, err := s.store.GetTrace(ctx, id)
	if err != nil {
		return err
	}
	if len(spans) == 0 {
		return &notFound{id.String() + " not found"}
	}
	return writeJSON(w, codec.AppendJSONV2Spans(nil, spans), "")
}

func (s *Server) getTraceMany(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	raw, ok := param(r, "traceIds")
	if !ok {
		return bad("traceIds parameter is empty")
	}
	var ids []model.TraceID
	seen := make(map[model.TraceID]bool)
	for _, part := range strings.SplitN(raw, ",", 1000) {
		id, err := model.ParseTraceID(part)
		if err != nil {
			return bad(err.Error())
		}
		if seen[id] {
			return bad("redundant traceId: " + part)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if len(ids) == 1 {
		return bad("Use /api/v2/trace/{traceId} endpoint to retrieve a single trace")
	}
	traces, err := s.store.GetTracesByIDs(ctx, ids)
	if err != nil {
		return err
	}
	return writeJSON(w, codec.AppendJSONV2Traces(nil, traces), "")
}

func (s *Server) getDependencies(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	if _, err := requiredParam(r, "endTs"); err != nil {
		return err
	}
	endTs, err := int64Param(r, "endTs", 0)
	if err != nil {
		return err
	}
	lookback, err := int64Param(r, "lookback", s.cfg.DefaultLookback)
	if err != nil {
		return err
	}
	switch {
	case endTs <= 0:
		return bad("endTs <= 0")
	case lookback <= 0:
		return bad("lookback <= 0")
	}
	links, err := s.store.GetDependencies(ctx, endTs, lookback)
	if err != nil {
		return err
	}
	return writeJSON(w, codec.AppendDependencyLinks(nil, links), "")
}

func (s *Server) getAutocompleteKeys(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	keys, err := s.store.GetKeys(ctx)
	if err != nil {
		return err
	}
	return writeStrings(w, keys, cacheNames)
}

func (s *Server) getAutocompleteValues(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	if q := r.URL.Query(); q.Has("key") && q.Get("key") == "" {
		return bad("key was empty") // Zipkin's getValues("")
	}
	key, err := requiredParam(r, "key")
	if err != nil {
		return err
	}
	values, err := s.store.GetValues(ctx, key)
	if err != nil {
		return err
	}
	cc := ""
	if len(values) > 3 {
		cc = cacheNames
	}
	return writeStrings(w, values, cc)
}
