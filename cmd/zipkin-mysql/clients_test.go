package main

import (
	_ "github.com/openzipkin/zipkin-go/reporter/http"
	_ "go.opentelemetry.io/otel/exporters/zipkin"
	_ "go.opentelemetry.io/otel/sdk/trace"
)
