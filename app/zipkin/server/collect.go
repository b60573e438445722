package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// endpointKind is which collector endpoint a POST came to.
type endpointKind int

const (
	v2Endpoint endpointKind = iota // POST /api/v2/spans: JSON v2 or proto3
	v1Endpoint                     // POST /api/v1/spans: JSON v1
)

// postSpans is Zipkin's collector endpoint, a mapping of Transport.Ingest
// (which reads the body bounded, gunzips it bounded, decodes and validates
// it synchronously, samples, and offers the spans to the queue) to HTTP:
// 202 when accepted; 400, 408 or 413 when something is wrong with the body
// (nothing of it is stored); 503 with Retry-After when there is no room.
func (s *Server) postSpans(ep endpointKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		res := s.http.Ingest(r.Context(), Message{Request: r, ResponseWriter: w, Decode: func(body []byte) (Decoded, error) {
			// Zipkin answers an empty body or an empty list with 202 and
			// stores nothing (Brave's check() posts "[]").
			if len(body) == 0 || isEmptyList(body) {
				return Decoded{Empty: true}, nil
			}
			spans, format, err := decodeSpansFormat(ep, ct, body)
			return Decoded{Spans: spans, Format: format}, err
		}})
		writeResult(w, res)
	}
}

// HTTPStatus maps a Result of Transport.Ingest to the HTTP status of a
// span endpoint: Accepted 202, Refused 415, Malformed 400, TooLarge 413,
// Timeout 408, RetryLater 503, Stopped 503.
func HTTPStatus(o Outcome) int {
	switch o {
	case Accepted:
		return http.StatusAccepted
	case Refused:
		return http.StatusUnsupportedMediaType
	case Malformed:
		return http.StatusBadRequest
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case Timeout:
		return http.StatusRequestTimeout
	}
	return http.StatusServiceUnavailable
}

// writeResult answers res as POST /api/v2/spans does: the status of
// HTTPStatus, with a text/plain body of res.Err, and with Retry-After
// (whole seconds) for RetryLater. An Accepted result is answered 202 with
// no body.
func writeResult(w http.ResponseWriter, res Result) {
	if res.Outcome == Accepted {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	SetRetryAfter(w, res)
	msg := res.Err.Error()
	if errors.Is(res.Err, ErrTooManySpans) {
		msg = "Request Entity Too Large: " + msg
	}
	textError(w, HTTPStatus(res.Outcome), msg)
}

// SetRetryAfter sets the Retry-After header of a RetryLater result.
func SetRetryAfter(w http.ResponseWriter, res Result) {
	if res.Outcome == RetryLater {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(res.RetryAfter/time.Second), 10))
	}
}
