package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// WrkResult is the summary the wrk script's done hook prints.
type WrkResult struct {
	Requests      int64   `json:"requests"`
	DurationUs    int64   `json:"duration_us"`
	Bytes         int64   `json:"bytes"`
	ConnectErrors int64   `json:"connect_errors"`
	ReadErrors    int64   `json:"read_errors"`
	WriteErrors   int64   `json:"write_errors"`
	StatusErrors  int64   `json:"status_errors"` // non-2xx/3xx answers: the 503s here
	Timeouts      int64   `json:"timeouts"`
	P50Us         int64   `json:"p50_us"`
	P99Us         int64   `json:"p99_us"`
	P999Us        int64   `json:"p999_us"`
	MaxUs         int64   `json:"max_us"`
	MeanUs        float64 `json:"mean_us"`
}

// RPS is the requests completed per second.
func (w WrkResult) RPS() float64 {
	if w.DurationUs <= 0 {
		return 0
	}
	return float64(w.Requests) / (float64(w.DurationUs) / 1e6)
}

// parseWrk finds the WRKJSON line in wrk's output.
func parseWrk(out string) (WrkResult, error) {
	var r WrkResult
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "WRKJSON "); ok {
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return r, fmt.Errorf("wrk summary %q: %w", rest, err)
			}
			return r, nil
		}
	}
	return r, fmt.Errorf("no WRKJSON line in wrk's output (is the script's done hook running?):\n%s", out)
}

// runWrk runs wrk closed-loop against base for d with conns connections,
// pinned to cpus, sending payload (payloadJSON, payloadOTelJSON or
// payloadOTLP) with the script luaScript, luaOTelJSONScript or
// luaOTLPScript writes.
func runWrk(ctx context.Context, dir, cpus, base, payload string, conns int, d time.Duration) (WrkResult, error) {
	script := filepath.Join(dir, "zipkin-spans.lua")
	text := luaScript
	switch payload {
	case payloadOTLP:
		script, text = filepath.Join(dir, "otlp-traces.lua"), luaOTLPScript
	case payloadOTelJSON:
		script, text = filepath.Join(dir, "otel-json-spans.lua"), luaOTelJSONScript
	}
	if _, err := os.Stat(script); err != nil {
		if err := os.WriteFile(script, []byte(text(64, 1)), 0o644); err != nil {
			return WrkResult{}, err
		}
	}
	secs := max(1, int(d.Seconds()))
	cmd := exec.CommandContext(ctx, "taskset", "-c", cpus, "wrk", "-t1", "-c"+strconv.Itoa(conns),
		"-d"+strconv.Itoa(secs)+"s", "--timeout", "10s", "-s", script, base)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return WrkResult{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	return parseWrk(string(out))
}
