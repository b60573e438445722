package replica

import "github.com/prometheus/client_golang/prometheus"

// Collector returns a Prometheus collector of the router's Stats, labelled by router (Config.Name)
// and replica (Replica.Name):
//
//	sqlpool_replica_usable                       1 while the replica gets reads
//	sqlpool_replica_lag_seconds                  lag at its last poll
//	sqlpool_replica_reads_total                  borrows routed to it
//	sqlpool_replica_waits_total                  reads that waited for it to reach their token
//	sqlpool_replica_wait_seconds_total           their total wait
//	sqlpool_replica_wait_timeouts_total          waits that gave up (the read went to the primary)
//	sqlpool_replica_errors_total                 failed polls, borrows and first calls
//	sqlpool_replica_primary_reads_total{reason}  reads on the primary: no_replica, wait_timeout, sticky, total
//	sqlpool_replica_commits_total                commits whose position the writer read
//	sqlpool_replica_commit_position_errors_total those where reading it failed
//
// Register it once per router: prometheus.MustRegister(r.Collector()).
func (r *Router) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Router }

var (
	rl             = []string{"router", "replica"}
	descUsable     = prometheus.NewDesc("sqlpool_replica_usable", "1 while the replica gets reads.", rl, nil)
	descLag        = prometheus.NewDesc("sqlpool_replica_lag_seconds", "Replica lag at its last poll.", rl, nil)
	descReads      = prometheus.NewDesc("sqlpool_replica_reads_total", "Reads routed to the replica.", rl, nil)
	descWaits      = prometheus.NewDesc("sqlpool_replica_waits_total", "Reads that waited for the replica to reach their token.", rl, nil)
	descWaitSecs   = prometheus.NewDesc("sqlpool_replica_wait_seconds_total", "Total time reads waited for the replica.", rl, nil)
	descWaitTO     = prometheus.NewDesc("sqlpool_replica_wait_timeouts_total", "Waits that gave up; the read went to the primary.", rl, nil)
	descErrors     = prometheus.NewDesc("sqlpool_replica_errors_total", "Failed polls, borrows and first calls on the replica.", rl, nil)
	descPrimary    = prometheus.NewDesc("sqlpool_replica_primary_reads_total", "Reads sent to the primary, by reason.", []string{"router", "reason"}, nil)
	descCommits    = prometheus.NewDesc("sqlpool_replica_commits_total", "Commits whose position the writer read.", []string{"router"}, nil)
	descCommitErrs = prometheus.NewDesc("sqlpool_replica_commit_position_errors_total", "Commits whose position could not be read.", []string{"router"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUsable, descLag, descReads, descWaits, descWaitSecs, descWaitTO, descErrors, descPrimary, descCommits, descCommitErrs} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.Stats()
	name := c.r.cfg.Name
	for _, rs := range s.Replicas {
		usable := 0.0
		if rs.Usable {
			usable = 1
		}
		ch <- prometheus.MustNewConstMetric(descUsable, prometheus.GaugeValue, usable, name, rs.Name)
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, rs.Lag.Seconds(), name, rs.Name)
		ch <- prometheus.MustNewConstMetric(descReads, prometheus.CounterValue, float64(rs.Reads), name, rs.Name)
		ch <- prometheus.MustNewConstMetric(descWaits, prometheus.CounterValue, float64(rs.Waits), name, rs.Name)
		ch <- prometheus.MustNewConstMetric(descWaitSecs, prometheus.CounterValue, rs.WaitTime.Seconds(), name, rs.Name)
		ch <- prometheus.MustNewConstMetric(descWaitTO, prometheus.CounterValue, float64(rs.WaitTimeouts), name, rs.Name)
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(rs.Errors), name, rs.Name)
	}
	for reason, v := range map[string]uint64{"no_replica": s.NoReplica, "wait_timeout": s.WaitTimeouts, "sticky": s.Sticky, "total": s.PrimaryReads} {
		ch <- prometheus.MustNewConstMetric(descPrimary, prometheus.CounterValue, float64(v), name, reason)
	}
	ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(s.Commits), name)
	ch <- prometheus.MustNewConstMetric(descCommitErrs, prometheus.CounterValue, float64(s.CommitErrors), name)
}
