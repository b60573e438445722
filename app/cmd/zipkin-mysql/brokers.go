package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/app/zipkin/collector/kafka"
	"github.com/sqlpool/sqlpool/app/zipkin/collector/rabbitmq"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// brokerConfig is the message-queue collectors' part of the configuration,
// from Zipkin's environment variables. A nil collector is off.
type brokerConfig struct {
	Kafka  *kafka.Config    // KAFKA_BOOTSTRAP_SERVERS set and COLLECTOR_KAFKA_ENABLED not false
	Rabbit *rabbitmq.Config // RABBIT_ADDRESSES or RABBIT_URI set and COLLECTOR_RABBITMQ_ENABLED not false
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseBrokers reads Zipkin's Kafka and RabbitMQ collector variables, with
// Zipkin's defaults: KAFKA_TOPIC zipkin, KAFKA_GROUP_ID zipkin,
// KAFKA_STREAMS 1; RABBIT_QUEUE zipkin, RABBIT_USER/RABBIT_PASSWORD guest,
// RABBIT_VIRTUAL_HOST /, RABBIT_CONCURRENCY 1, RABBIT_CONNECTION_TIMEOUT
// 60000 ms, RABBIT_USE_SSL false.
func parseBrokers(getenv func(string) string) (brokerConfig, error) {
	var bc brokerConfig
	kafkaOn, err := envBool(getenv, "COLLECTOR_KAFKA_ENABLED", true)
	if err != nil {
		return bc, err
	}
	if servers := splitList(getenv("KAFKA_BOOTSTRAP_SERVERS")); kafkaOn && len(servers) > 0 {
		streams, err := envInt(getenv, "KAFKA_STREAMS", kafka.DefaultStreams)
		if err != nil {
			return bc, err
		}
		if streams <= 0 {
			return bc, fmt.Errorf("KAFKA_STREAMS=%d: use a positive number of consumer threads (default 1)", streams)
		}
		bc.Kafka = &kafka.Config{Brokers: servers, Topics: splitList(getenv("KAFKA_TOPIC")),
			GroupID: strings.TrimSpace(getenv("KAFKA_GROUP_ID")), Streams: streams}
	}
	rabbitOn, err := envBool(getenv, "COLLECTOR_RABBITMQ_ENABLED", true)
	if err != nil {
		return bc, err
	}
	addrs, uri := splitList(getenv("RABBIT_ADDRESSES")), strings.TrimSpace(getenv("RABBIT_URI"))
	if rabbitOn && (len(addrs) > 0 || uri != "") {
		conc, err := envInt(getenv, "RABBIT_CONCURRENCY", rabbitmq.DefaultConcurrency)
		if err != nil {
			return bc, err
		}
		if conc <= 0 {
			return bc, fmt.Errorf("RABBIT_CONCURRENCY=%d: use a positive number of consumers (default 1)", conc)
		}
		timeout, err := envInt(getenv, "RABBIT_CONNECTION_TIMEOUT", int(rabbitmq.DefaultConnectionTimeout/time.Millisecond))
		if err != nil {
			return bc, err
		}
		if timeout <= 0 {
			return bc, fmt.Errorf("RABBIT_CONNECTION_TIMEOUT=%d: use a positive number of milliseconds (default 60000)", timeout)
		}
		tls, err := envBool(getenv, "RABBIT_USE_SSL", false)
		if err != nil {
			return bc, err
		}
		bc.Rabbit = &rabbitmq.Config{Addresses: addrs, URI: uri, Queue: strings.TrimSpace(getenv("RABBIT_QUEUE")),
			User: getenv("RABBIT_USER"), Password: getenv("RABBIT_PASSWORD"), VirtualHost: getenv("RABBIT_VIRTUAL_HOST"),
			UseTLS: tls, Concurrency: conc, ConnectionTimeout: time.Duration(timeout) * time.Millisecond}
	}
	return bc, nil
}

// rabbitSecret returns the RabbitMQ password (or the URI's), for redaction.
func (bc brokerConfig) rabbitSecret() string {
	if bc.Rabbit == nil {
		return ""
	}
	if bc.Rabbit.URI != "" {
		if i, j := strings.Index(bc.Rabbit.URI, "://"), strings.LastIndex(bc.Rabbit.URI, "@"); i >= 0 && j > i {
			if k := strings.Index(bc.Rabbit.URI[i+3:j], ":"); k >= 0 {
				return bc.Rabbit.URI[i+3+k+1 : j]
			}
		}
		return ""
	}
	return bc.Rabbit.Password
}

// startBrokers starts the configured message-queue collectors on srv and
// returns a stop function that closes them within its context (call it
// before srv.Close; calling it again does nothing).
func startBrokers(bc brokerConfig, srv *server.Server, log *slog.Logger, reg prometheus.Registerer) (stop func(context.Context) error, err error) {
	var closers []func(context.Context) error
	stop = func(ctx context.Context) error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c(ctx))
		}
		closers = nil
		return errors.Join(errs...)
	}
	if bc.Kafka != nil {
		tr, err := srv.Transport("kafka")
		if err != nil {
			return stop, err
		}
		cfg := *bc.Kafka
		cfg.Transport, cfg.Logger, cfg.Registerer = tr, log, reg
		c, err := kafka.Start(cfg)
		if err != nil {
			return stop, err
		}
		closers = append(closers, c.Close)
		if err := srv.AddHealthCheck("KafkaCollector", c.Check); err != nil {
			_ = stop(context.Background())
			return stop, err
		}
		log.Info("kafka collector started", "brokers", strings.Join(cfg.Brokers, ","), "topics", strings.Join(orDefault(cfg.Topics, kafka.DefaultTopic), ","),
			"group", orString(cfg.GroupID, kafka.DefaultGroupID), "streams", cfg.Streams)
	}
	if bc.Rabbit != nil {
		tr, err := srv.Transport("rabbitmq")
		if err != nil {
			_ = stop(context.Background())
			return stop, err
		}
		cfg := *bc.Rabbit
		cfg.Transport, cfg.Logger = tr, log
		c, err := rabbitmq.Start(cfg)
		if err != nil {
			_ = stop(context.Background())
			return stop, err
		}
		closers = append(closers, c.Close)
		if err := srv.AddHealthCheck("RabbitMQCollector", c.Check); err != nil {
			_ = stop(context.Background())
			return stop, err
		}
		log.Info("rabbitmq collector started", "queue", orString(cfg.Queue, rabbitmq.DefaultQueue), "concurrency", cfg.Concurrency,
			"prefetch", c.Prefetch())
	}
	return stop, nil
}

func orDefault(v []string, d string) []string {
	if len(v) == 0 {
		return []string{d}
	}
	return v
}

func orString(v, d string) string {
	if v == "" {
		return d
	}
	return v
}
