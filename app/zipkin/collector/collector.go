// Package collector holds what the message-queue collectors (the kafka and
// rabbitmq packages below it) share: decoding a message as Zipkin's
// collectors do, and handing its spans to the server's ingest queue with a
// completion, so that a message is acknowledged to its broker only once its
// spans are stored.
//
// A message is a list of spans in JSON v1, JSON v2 or proto3, told apart as
// Zipkin's SpanBytesDecoderDetector does: a first byte ≤ 16 is binary
// (proto3 when it is 10 and the next byte is not 0, else thrift, which this
// server refuses); '[' is JSON, v2 when the message contains `Endpoint"` or
// `"tags"`, else v1; anything else, a bare JSON object included, is refused.
// A refused message (not spans, malformed, thrift, larger than the bound) is
// a poison message: counted in zipkin_collector_messages_dropped_total,
// logged once with where it came from, and acknowledged, so that it never
// blocks what follows it.
package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// ErrThrift is the error of a thrift-encoded message.
var ErrThrift = errors.New("THRIFT encoded spans are not supported by this server; send JSON_V1, JSON_V2 or PROTO3")

// Decode decodes one message: a list of spans in JSON v1, JSON v2 or
// proto3, detected as Zipkin detects it. An empty message decodes to no
// spans and no error. Any error means nothing of the message is kept, as
// Zipkin drops a message that does not decode whole.
func Decode(msg []byte) ([]model.Span, codec.Format, error) {
	if len(msg) == 0 {
		return nil, codec.FormatUnknown, nil
	}
	b0 := msg[0]
	switch {
	case b0 <= 16:
		if b0 == 10 && len(msg) > 1 && msg[1] != 0 {
			spans, err := codec.DecodeProto3(msg)
			return spans, codec.Proto3, err
		}
		return nil, codec.Thrift, ErrThrift
	case b0 == '[':
		// DetectFormat with JSON_V1 wanted is Zipkin's rule: v2 on
		// `Endpoint"` or `"tags"`, v1 otherwise.
		if codec.DetectFormat(msg, codec.JSONV1) == codec.JSONV2 {
			spans, err := codec.DecodeJSONV2(msg)
			return spans, codec.JSONV2, err
		}
		spans, err := codec.DecodeJSONV1(msg)
		return spans, codec.JSONV1, err
	case b0 == '{':
		return nil, codec.FormatUnknown, errors.New("Expected json, proto3 or thrift list encoding")
	}
	return nil, codec.FormatUnknown, errors.New("Could not detect the span format")
}

// Outcome is what Handle did with a message.
type Outcome int

const (
	// Queued: the spans are in the ingest queue (or there were none to
	// store); done will be called (it may have been already) once they
	// are stored or given up.
	Queued Outcome = iota
	// Skipped: a poison message (counted and logged); done is not
	// called, and the caller acknowledges the message now.
	Skipped
	// Stopped: the context ended or the server is closing before the spans
	// could be queued; done is not called and the message must not be
	// acknowledged (the broker delivers it again).
	Stopped
)

// Handler hands messages of one transport to the server.
type Handler struct {
	// Transport is the server's entry point for this collector. Required.
	Transport *server.Transport
	// Logger receives one line per poison message. Zero value:
	// slog.Default().
	Logger *slog.Logger
}

// Handle hands one message to the server's one entry point,
// Transport.Ingest, as a broker message (Message.Done): it is counted on
// receipt (zipkin_collector_messages_total and _bytes, as Zipkin counts),
// decoded as Decode does, and its spans offered to the server's queue,
// waiting while the queue is full until ctx ends. It maps the Result to
// what the broker is to do:
//
//   - Accepted: Queued; done will be called (it may have been already)
//     once the spans are stored or given up (an empty message, or one
//     whose spans were all sampled out, is done at once).
//   - Malformed or TooLarge (larger than the server's MaxBodyBytes, or
//     more spans than the queue holds): a poison message, logged with
//     where, Skipped; done is not called.
//   - Stopped: done is not called and the message must not be
//     acknowledged.
//
// where names the message in a poison log line, e.g. "zipkin/3@1234"
// (Kafka) or "delivery tag 17" (RabbitMQ). msg must not be modified until
// done is called.
func (h *Handler) Handle(ctx context.Context, msg []byte, where string, done func(error)) Outcome {
	t := h.Transport
	res := t.Ingest(ctx, server.Message{Body: msg, Done: done, Decode: decodeMessage})
	switch res.Outcome {
	case server.Accepted:
		return Queued
	case server.Stopped:
		return Stopped
	}
	h.logger().Warn("poison message skipped", "transport", t.Name(), "at", where, "bytes", len(msg), "err", res.Err.Error())
	return Skipped
}

// decodeMessage is Decode as a server.Decoder: an error names the format.
func decodeMessage(msg []byte) (server.Decoded, error) {
	spans, format, err := Decode(msg)
	if err != nil {
		return server.Decoded{}, fmt.Errorf("%s: %w", format, err)
	}
	return server.Decoded{Spans: spans, Format: format}, nil
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger == nil {
		return slog.Default()
	}
	return h.Logger
}

// Where formats a Kafka record's position for a log line: topic/partition@offset.
func Where(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.Itoa(int(partition)) + "@" + strconv.FormatInt(offset, 10)
}
