package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"google.golang.org/grpc"

	"github.com/sqlpool/sqlpool/app/zipkin/collector/grpccollector"
	"github.com/sqlpool/sqlpool/app/zipkin/collector/otlphttp"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// Defaults of the collectors beside POST /api/v2/spans.
const defaultOTLPGRPCPort = 4317 // OTLP's registered gRPC port

// collectorConfig is which collectors run besides Zipkin's HTTP ones.
type collectorConfig struct {
	// OTLPHTTP serves POST /v1/traces on the HTTP port
	// (COLLECTOR_OTLP_HTTP_ENABLED, default true).
	OTLPHTTP bool
	// GRPC serves zipkin.proto3.SpanService/Report on the HTTP port, over
	// unencrypted HTTP/2 (COLLECTOR_GRPC_ENABLED, default true, as Zipkin
	// since 3.1).
	GRPC bool
	// OTLPGRPC serves OTLP/gRPC TraceService/Export on its own port
	// (COLLECTOR_OTLP_GRPC_ENABLED, default false) OTLPGRPCPort
	// (COLLECTOR_OTLP_GRPC_PORT, default 4317; 0 picks a free port), on the
	// host of the HTTP listen address.
	OTLPGRPC     bool
	OTLPGRPCPort int
}

// parseCollectorConfig reads the collectors' environment variables.
func parseCollectorConfig(getenv func(string) string) (collectorConfig, error) {
	var c collectorConfig
	var err error
	if c.OTLPHTTP, err = envBool(getenv, "COLLECTOR_OTLP_HTTP_ENABLED", true); err != nil {
		return c, err
	}
	if c.GRPC, err = envBool(getenv, "COLLECTOR_GRPC_ENABLED", true); err != nil {
		return c, err
	}
	if c.OTLPGRPC, err = envBool(getenv, "COLLECTOR_OTLP_GRPC_ENABLED", false); err != nil {
		return c, err
	}
	if c.OTLPGRPCPort, err = envInt(getenv, "COLLECTOR_OTLP_GRPC_PORT", defaultOTLPGRPCPort); err != nil {
		return c, err
	}
	if c.OTLPGRPCPort < 0 || c.OTLPGRPCPort > 65535 {
		return c, fmt.Errorf("COLLECTOR_OTLP_GRPC_PORT=%d is not a port number (0-65535)", c.OTLPGRPCPort)
	}
	return c, nil
}

// spanCollectors is what startCollectors started.
type spanCollectors struct {
	handler  http.Handler // the HTTP port's handler: Zipkin's API plus /v1/traces and gRPC as enabled
	h2c      bool         // the HTTP server must accept unencrypted HTTP/2 (gRPC on the HTTP port)
	otlpAddr string       // the OTLP/gRPC listen address, "" when off
	grpcs    []*grpc.Server
}

// startCollectors registers the enabled collectors' transports on srv and
// starts the OTLP/gRPC listener; every collector goes into srv's one
// bounded queue.
func startCollectors(cc collectorConfig, srv *server.Server, listen string, log *slog.Logger) (*spanCollectors, error) {
	c := &spanCollectors{}
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	if cc.OTLPHTTP {
		tr, err := srv.Transport("otlp-http")
		if err != nil {
			return nil, err
		}
		mux.Handle(otlphttp.Path, otlphttp.Handler(tr))
	}
	c.handler = mux
	if cc.GRPC {
		tr, err := srv.Transport("grpc")
		if err != nil {
			return nil, err
		}
		g := grpccollector.NewServer(nil, tr)
		c.grpcs = append(c.grpcs, g)
		c.handler = grpccollector.Handler(g, mux)
		c.h2c = true
	}
	if cc.OTLPGRPC {
		tr, err := srv.Transport("otlp-grpc")
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(listen)
		addr := net.JoinHostPort(host, strconv.Itoa(cc.OTLPGRPCPort))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("cannot listen on %s for OTLP/gRPC (%v): stop the process using it (an OpenTelemetry Collector or agent?), set COLLECTOR_OTLP_GRPC_PORT to a free port, or COLLECTOR_OTLP_GRPC_ENABLED=false", addr, err)
		}
		g := grpccollector.NewServer(tr, nil)
		c.grpcs = append(c.grpcs, g)
		c.otlpAddr = ln.Addr().String()
		go func() {
			if err := g.Serve(ln); err != nil {
				log.Error("OTLP/gRPC server stopped", "err", err)
			}
		}()
	}
	return c, nil
}

// stop ends the gRPC servers: in-flight calls finish until ctx ends, then
// they are cut.
func (c *spanCollectors) stop(ctx context.Context) {
	for _, g := range c.grpcs {
		done := make(chan struct{})
		go func() { g.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			g.Stop()
			<-done
		}
	}
}

// close cuts the gRPC servers at once (after stop, a no-op).
func (c *spanCollectors) close() {
	for _, g := range c.grpcs {
		g.Stop()
	}
}
