package otlp

import (
	"errors"
	"mime"
	"net/http"
	"strconv"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// Path is where OTLP/HTTP trace exports are posted.
const Path = "/v1/traces"

// Content types of the two OTLP/HTTP encodings.
const (
	ContentTypeProto = "application/x-protobuf"
	ContentTypeJSON  = "application/json"
)

// Handler serves POST /v1/traces, OTLP/HTTP, into tr:
//
//   - Content-Type application/x-protobuf or application/json (other: 415);
//     Content-Encoding gzip or none; the body bounded by tr.MaxBodyBytes
//     before and after gunzip (above: 413).
//   - 200 with an ExportTraceServiceResponse in the request's encoding; when
//     spans were rejected for invalid IDs, its partial_success says how
//     many and why, and the others are stored.
//   - 400 for a body that does not decode, 413 for a body or a span count
//     above the bounds, 408 for a body that does not arrive in time: a
//     google.rpc.Status in the request's encoding (text/plain for 415);
//     nothing of the request is stored. The client must not retry these.
//   - 503 with Retry-After (whole seconds) when the ingest queue is full,
//     the decoding slots are taken or the server is stopping: nothing is
//     stored and the client retries.
func Handler(tr *server.Transport) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.Received()
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "Method Not Allowed: OTLP/HTTP takes POST", http.StatusMethodNotAllowed)
			return
		}
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		isJSON := false
		switch ct {
		case ContentTypeProto:
		case ContentTypeJSON:
			isJSON = true
		default:
			tr.Dropped()
			http.Error(w, "Unsupported Media Type: send "+ContentTypeProto+" or "+ContentTypeJSON, http.StatusUnsupportedMediaType)
			return
		}
		if err := tr.Unavailable(); err != nil {
			retryLater(w, tr, isJSON, err)
			return
		}
		// The body is read before a decoding slot is taken: a client that
		// stalls while sending holds none.
		body, status, msg := tr.ReadBody(w, r)
		switch status {
		case 0:
		case http.StatusServiceUnavailable:
			retryLater(w, tr, isJSON, errors.New(msg))
			return
		default:
			writeStatus(w, isJSON, status, msg)
			return
		}
		if !tr.Acquire(r.Context()) {
			retryLater(w, tr, isJSON, errors.New("too many export requests are being decoded"))
			return
		}
		defer tr.Release()
		tr.Bytes(len(body))
		var req *coltracepb.ExportTraceServiceRequest
		var err error
		if isJSON {
			req, err = DecodeJSON(body)
		} else {
			req, err = DecodeProto(body)
		}
		if err != nil {
			tr.Dropped()
			writeStatus(w, isJSON, http.StatusBadRequest, err.Error())
			return
		}
		res := ToSpans(req.GetResourceSpans())
		switch err := tr.Accept(res.Spans, int64(len(body))); {
		case errors.Is(err, server.ErrTooManySpans):
			writeStatus(w, isJSON, http.StatusRequestEntityTooLarge, err.Error())
			return
		case err != nil:
			retryLater(w, tr, isJSON, err)
			return
		}
		tr.SpansDropped(int(res.Rejected))
		resp := &coltracepb.ExportTraceServiceResponse{}
		if res.Rejected > 0 {
			resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: res.Rejected, ErrorMessage: res.Message}
		}
		writeMessage(w, isJSON, http.StatusOK, resp)
	})
}

// retryLater answers 503 with Retry-After.
func retryLater(w http.ResponseWriter, tr *server.Transport, isJSON bool, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(int(tr.RetryAfter().Seconds())))
	msg := "The span queue is full; retry later"
	switch {
	case errors.Is(err, server.ErrClosing):
		msg = "The server is shutting down; send the spans to another instance or retry later"
	case !errors.Is(err, server.ErrQueueFull):
		msg = err.Error() + "; retry later"
	}
	writeStatus(w, isJSON, http.StatusServiceUnavailable, msg)
}

// writeStatus answers an error with a google.rpc.Status body.
func writeStatus(w http.ResponseWriter, isJSON bool, httpStatus int, msg string) {
	writeMessage(w, isJSON, httpStatus, &statuspb.Status{Code: int32(rpcCode(httpStatus)), Message: msg})
}

func rpcCode(httpStatus int) code.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return code.Code_INVALID_ARGUMENT
	case http.StatusRequestEntityTooLarge:
		return code.Code_RESOURCE_EXHAUSTED
	case http.StatusRequestTimeout:
		return code.Code_DEADLINE_EXCEEDED
	case http.StatusServiceUnavailable:
		return code.Code_UNAVAILABLE
	}
	return code.Code_UNKNOWN
}

func writeMessage(w http.ResponseWriter, isJSON bool, httpStatus int, m proto.Message) {
	var b []byte
	if isJSON {
		b, _ = protojson.Marshal(m)
		w.Header().Set("Content-Type", ContentTypeJSON)
	} else {
		b, _ = proto.Marshal(m)
		w.Header().Set("Content-Type", ContentTypeProto)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(httpStatus)
	_, _ = w.Write(b)
}
