// Package grpccollector serves the two gRPC span collectors into
// server.Transport entry points (every request through Transport.Ingest,
// whose Result this package maps to a gRPC status): OTLP/gRPC
// (opentelemetry.proto.collector.trace.v1.TraceService/Export) and
// Zipkin's own zipkin.proto3.SpanService/Report.
//
// Both services are described by hand (grpc.ServiceDesc) and take the
// request as raw bytes, so that this package decodes it itself: a
// malformed message is INVALID_ARGUMENT (gRPC's own decoding would answer
// INTERNAL), and Zipkin's proto3 list is read by the same decoder, with the
// same validation, as POST /api/v2/spans.
//
// Status codes, by Outcome of the Result: Accepted is OK (with
// partial_success for OTLP spans rejected for invalid IDs); Refused and
// Malformed are INVALID_ARGUMENT (a message that does not decode);
// TooLarge is RESOURCE_EXHAUSTED (no RetryInfo: not retried) for a message
// larger than the body bound or with more spans than the queue holds;
// RetryLater is UNAVAILABLE with a google.rpc.RetryInfo of Result.RetryAfter
// (Config.RetryAfter) when the queue is full, the decoding slots are taken
// or the server is stopping.
package grpccollector

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed requests (otlptracegrpc.WithCompressor("gzip"))
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/otlp"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// Full method names.
const (
	OTLPExportMethod   = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	ZipkinReportMethod = "/zipkin.proto3.SpanService/Report"
)

// NewServer returns a gRPC server with TraceService/Export when otlpTr is
// not nil and SpanService/Report when zipkinTr is not nil. Messages above
// the transports' MaxBodyBytes are refused by gRPC with
// RESOURCE_EXHAUSTED. opts are added after this package's.
func NewServer(otlpTr, zipkinTr *server.Transport, opts ...grpc.ServerOption) *grpc.Server {
	var limit int64
	for _, tr := range []*server.Transport{otlpTr, zipkinTr} {
		if tr != nil {
			limit = max(limit, tr.MaxBodyBytes())
		}
	}
	base := []grpc.ServerOption{grpc.ForceServerCodec(rawCodec{})}
	if limit > 0 {
		base = append(base, grpc.MaxRecvMsgSize(int(min(limit, 1<<31-1))))
	}
	g := grpc.NewServer(append(base, opts...)...)
	if otlpTr != nil {
		g.RegisterService(serviceDesc("opentelemetry.proto.collector.trace.v1.TraceService", "Export",
			"opentelemetry/proto/collector/trace/v1/trace_service.proto", exportOTLP), otlpTr)
	}
	if zipkinTr != nil {
		g.RegisterService(serviceDesc("zipkin.proto3.SpanService", "Report", "zipkin.proto", reportZipkin), zipkinTr)
	}
	return g
}

// Handler serves gRPC requests (HTTP/2 with a Content-Type of
// application/grpc...) with g and everything else with next, so that one
// HTTP port can carry both, as Zipkin's port 9411 does. The http.Server
// must accept unencrypted HTTP/2 (Protocols.SetUnencryptedHTTP2).
func Handler(g *grpc.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			g.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rawMessage is a request or response as bytes.
type rawMessage struct{ b []byte }

// rawCodec passes *rawMessage through; it is named "proto" so that clients
// sending application/grpc or application/grpc+proto are served.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *rawMessage:
		return m.b, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("grpccollector: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *rawMessage:
		m.b = append([]byte(nil), data...)
		return nil
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("grpccollector: cannot unmarshal into %T", v)
}

var _ encoding.Codec = rawCodec{}

// handlerFunc serves one request of a method: it ingests body through
// tr and returns the response message or a status error.
type handlerFunc func(ctx context.Context, tr *server.Transport, body []byte, refuse error) ([]byte, error)

func serviceDesc(service, method, file string, h handlerFunc) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: service,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: method,
			Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				tr := srv.(*server.Transport)
				var in rawMessage
				refuse := dec(&in) // a message gRPC cannot read: INVALID_ARGUMENT, counted by Ingest
				out, err := h(ctx, tr, in.b, refuse)
				if err != nil {
					return nil, err
				}
				return &rawMessage{b: out}, nil
			},
		}},
		Metadata: file,
	}
}

func exportOTLP(ctx context.Context, tr *server.Transport, body []byte, refuse error) ([]byte, error) {
	res := tr.Ingest(ctx, server.Message{Body: body, Refuse: refuse, Decode: func(body []byte) (server.Decoded, error) {
		req, err := otlp.DecodeProto(body)
		if err != nil {
			return server.Decoded{}, err
		}
		res := otlp.ToSpans(req.GetResourceSpans())
		return server.Decoded{Spans: res.Spans, Rejected: res.Rejected, RejectedMessage: res.Message}, nil
	}})
	if err := statusOf(res); err != nil {
		return nil, err
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	if res.Rejected > 0 {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: res.Rejected, ErrorMessage: res.RejectedMessage}
	}
	return proto.Marshal(resp)
}

func reportZipkin(ctx context.Context, tr *server.Transport, body []byte, refuse error) ([]byte, error) {
	// An empty ListOfSpans is Accepted by Ingest: success, as Zipkin.
	res := tr.Ingest(ctx, server.Message{Body: body, Refuse: refuse, Decode: func(body []byte) (server.Decoded, error) {
		spans, err := codec.DecodeProto3(body)
		return server.Decoded{Spans: spans, Format: codec.Proto3}, err
	}})
	return nil, statusOf(res) // ReportResponse has no fields
}

// statusOf maps a Result to a gRPC status error; nil for Accepted.
func statusOf(res server.Result) error {
	switch res.Outcome {
	case server.Accepted:
		return nil
	case server.Refused, server.Malformed:
		return status.Error(codes.InvalidArgument, res.Err.Error())
	case server.TooLarge:
		return status.Error(codes.ResourceExhausted, res.Err.Error())
	}
	// RetryLater (Timeout and Stopped are not outcomes of a gRPC message):
	// UNAVAILABLE with RetryInfo, which OTLP clients retry after the delay.
	msg := res.Err.Error()
	st, derr := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(res.RetryAfter)})
	if derr != nil {
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}
