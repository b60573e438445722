package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGrafanaDashboard: docs/grafana-dashboard.json is valid JSON, and every metric its
// queries name is one this package exports.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\b(hikaricp|sqlpool)_[a-z_]+`)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := n
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if _, ok := allNames[base]; !ok {
						base = strings.TrimSuffix(base, suffix)
					}
				}
				if _, ok := allNames[base]; !ok {
					t.Errorf("panel %q: unknown metric %s", p.Title, n)
				}
				used[base] = true
			}
		}
	}
	for _, want := range []string{"hikaricp_connections_active", "hikaricp_connections_idle", "hikaricp_connections_pending",
		"hikaricp_connections_max", "hikaricp_connections_acquire_seconds", "hikaricp_connections_acquire_seconds_max",
		"hikaricp_connections_usage_seconds", "hikaricp_connections_creation_seconds", "hikaricp_connections_timeout_total",
		"sqlpool_connections_closed_total", "sqlpool_statement_seconds", "sqlpool_statement_errors_total"} {
		if !used[want] {
			t.Errorf("the dashboard does not chart %s", want)
		}
	}
}
