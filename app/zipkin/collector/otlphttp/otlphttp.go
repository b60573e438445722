// Package otlphttp serves OTLP/HTTP trace exports (POST /v1/traces,
// protobuf and JSON encodings) into a server.Transport: every request goes
// through Transport.Ingest, and this package maps its Result to OTLP/HTTP's
// answers. The OTLP to Zipkin mapping is package otlp's.
package otlphttp

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

	"github.com/sqlpool/sqlpool/app/zipkin/otlp"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// Path is where OTLP/HTTP trace exports are posted.
const Path = "/v1/traces"

// Content types of the two OTLP/HTTP encodings.
const (
	ContentTypeProto = "application/x-protobuf"
	ContentTypeJSON  = "application/json"
)

// errMethod and errMediaType are the refusals of a request for its method
// or Content-Type (Message.Refuse).
var (
	errMethod    = errors.New("Method Not Allowed: OTLP/HTTP takes POST")
	errMediaType = errors.New("Unsupported Media Type: send " + ContentTypeProto + " or " + ContentTypeJSON)
)

// Handler serves POST /v1/traces, OTLP/HTTP, into tr. Results of
// tr.Ingest map to:
//
//   - Accepted: 200 with an ExportTraceServiceResponse in the request's
//     encoding; when spans were rejected for invalid IDs, its
//     partial_success says how many and why, and the others are stored.
//   - Refused: 405 (not POST, with Allow) or 415 (a Content-Type other than
//     application/x-protobuf or application/json), text/plain.
//   - Malformed 400, TooLarge 413 (the body, before or after gunzip, or the
//     span count, above the bounds), Timeout 408: a google.rpc.Status in
//     the request's encoding; nothing of the request is stored. The client
//     must not retry these.
//   - RetryLater: 503 with Retry-After (whole seconds) and a
//     google.rpc.Status: nothing is stored and the client retries.
func Handler(tr *server.Transport) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var refuse error
		isJSON := false
		if r.Method != http.MethodPost {
			refuse = errMethod
		} else {
			switch ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct {
			case ContentTypeProto:
			case ContentTypeJSON:
				isJSON = true
			default:
				refuse = errMediaType
			}
		}
		res := tr.Ingest(r.Context(), server.Message{Request: r, ResponseWriter: w, Refuse: refuse, Decode: func(body []byte) (server.Decoded, error) {
			var req *coltracepb.ExportTraceServiceRequest
			var err error
			if isJSON {
				req, err = otlp.DecodeJSON(body)
			} else {
				req, err = otlp.DecodeProto(body)
			}
			if err != nil {
				return server.Decoded{}, err
			}
			res := otlp.ToSpans(req.GetResourceSpans())
			return server.Decoded{Spans: res.Spans, Rejected: res.Rejected, RejectedMessage: res.Message}, nil
		}})
		switch res.Outcome {
		case server.Accepted:
			resp := &coltracepb.ExportTraceServiceResponse{}
			if res.Rejected > 0 {
				resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: res.Rejected, ErrorMessage: res.RejectedMessage}
			}
			writeMessage(w, isJSON, http.StatusOK, resp)
		case server.Refused:
			if errors.Is(res.Err, errMethod) {
				w.Header().Set("Allow", http.MethodPost)
				http.Error(w, res.Err.Error(), http.StatusMethodNotAllowed)
				return
			}
			http.Error(w, res.Err.Error(), http.StatusUnsupportedMediaType)
		default:
			server.SetRetryAfter(w, res)
			writeStatus(w, isJSON, server.HTTPStatus(res.Outcome), res.Err.Error())
		}
	})
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
