// Package grpccollector serves the two gRPC span collectors into
// server.Transport entry points: OTLP/gRPC
// (opentelemetry.proto.collector.trace.v1.TraceService/Export) and
// Zipkin's own zipkin.proto3.SpanService/Report.
//
// Both services are described by hand (grpc.ServiceDesc) and take the
// request as raw bytes, so that this package decodes it itself: a
// malformed message is INVALID_ARGUMENT (gRPC's own decoding would answer
// INTERNAL), and Zipkin's proto3 list is read by the same decoder, with the
// same validation, as POST /api/v2/spans.
//
// Status codes: OK (with partial_success for OTLP spans rejected for
// invalid IDs); INVALID_ARGUMENT for a message that does not decode;
// RESOURCE_EXHAUSTED (no RetryInfo: not retried) for a message larger than
// the body bound or with more spans than the queue holds; UNAVAILABLE with
// a google.rpc.RetryInfo of Config.RetryAfter when the queue is full, the
// decoding slots are taken or the server is stopping.
package grpccollector

import (
	"context"
	"errors"
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
	"github.com/sqlpool/sqlpool/app/zipkin/model"
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

type handlerFunc func(ctx context.Context, tr *server.Transport, body []byte) ([]byte, error)

func serviceDesc(service, method, file string, h handlerFunc) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: service,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: method,
			Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				tr := srv.(*server.Transport)
				tr.Received()
				var in rawMessage
				if err := dec(&in); err != nil {
					tr.Dropped()
					return nil, status.Error(codes.InvalidArgument, err.Error())
				}
				out, err := h(ctx, tr, in.b)
				if err != nil {
					return nil, err
				}
				return &rawMessage{b: out}, nil
			},
		}},
		Metadata: file,
	}
}

// admit refuses early when the queue is full or the slots are taken; the
// caller must call tr.Release when ok.
func admit(ctx context.Context, tr *server.Transport) error {
	if err := tr.Unavailable(); err != nil {
		return retryLater(tr, err)
	}
	if !tr.Acquire(ctx) {
		return retryLater(tr, errors.New("too many export requests are being decoded"))
	}
	return nil
}

func exportOTLP(ctx context.Context, tr *server.Transport, body []byte) ([]byte, error) {
	if err := admit(ctx, tr); err != nil {
		return nil, err
	}
	defer tr.Release()
	tr.Bytes(len(body))
	req, err := otlp.DecodeProto(body)
	if err != nil {
		tr.Dropped()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	res := otlp.ToSpans(req.GetResourceSpans())
	if err := accept(tr, res.Spans, len(body)); err != nil {
		return nil, err
	}
	tr.SpansDropped(int(res.Rejected))
	resp := &coltracepb.ExportTraceServiceResponse{}
	if res.Rejected > 0 {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: res.Rejected, ErrorMessage: res.Message}
	}
	return proto.Marshal(resp)
}

func reportZipkin(ctx context.Context, tr *server.Transport, body []byte) ([]byte, error) {
	if len(body) == 0 { // an empty ListOfSpans: success, as Zipkin
		return nil, nil
	}
	if err := admit(ctx, tr); err != nil {
		return nil, err
	}
	defer tr.Release()
	tr.Bytes(len(body))
	spans, err := codec.DecodeProto3(body)
	if err != nil {
		tr.Dropped()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := accept(tr, spans, len(body)); err != nil {
		return nil, err
	}
	return nil, nil // ReportResponse has no fields
}

func accept(tr *server.Transport, spans []model.Span, n int) error {
	err := tr.Accept(spans, int64(n))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, server.ErrTooManySpans):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return retryLater(tr, err)
}

// retryLater is UNAVAILABLE with RetryInfo: OTLP clients retry it after
// the delay.
func retryLater(tr *server.Transport, err error) error {
	msg := "the span queue is full; retry later"
	switch {
	case errors.Is(err, server.ErrClosing):
		msg = "the server is shutting down; send the spans to another instance or retry later"
	case !errors.Is(err, server.ErrQueueFull):
		msg = err.Error() + "; retry later"
	}
	st, derr := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(tr.RetryAfter())})
	if derr != nil {
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}
