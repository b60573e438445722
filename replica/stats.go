package replica

import "time"

// ReplicaStats is one replica's part of Stats.
type ReplicaStats struct {
	Name string
	// Usable says whether the replica gets reads now (up, polled, within MaxReplicaLag).
	Usable bool
	// Position is the replica's last polled position ("" before the first poll).
	Position string
	// Lag is how long ago the primary reached the oldest commit the replica had not applied
	// at its last poll (0 when it had applied everything known).
	Lag time.Duration
	// LastError is the last poll's error, or the error of a read that took it out; nil when
	// the last poll succeeded.
	LastError error
	// Reads counts borrows routed to the replica; Waits the reads that waited for it to reach
	// their Token, WaitTime their total wait, WaitTimeouts those that gave up and went to the
	// primary; Errors the failed polls, borrows and first calls that took it out of rotation.
	Reads, Waits, WaitTimeouts, Errors uint64
	WaitTime                           time.Duration
}

// Stats is a snapshot of a Router.
type Stats struct {
	Mode Mode
	// PrimaryPosition is the primary's last polled position merged with the commits seen.
	PrimaryPosition string
	Replicas        []ReplicaStats
	// PrimaryReads counts reads sent to the primary, for one of three reasons: NoReplica (no
	// usable replica), WaitTimeouts (the replica did not reach the Token within WaitTimeout),
	// Sticky (the Token's last read ran on the primary, or on a replica now out of rotation,
	// and no poll has bounded what it saw yet).
	PrimaryReads, NoReplica, WaitTimeouts, Sticky uint64
	// Commits counts commits whose position the writer read; CommitErrors those where that
	// failed (the Token's next reads then go to the primary until its next poll).
	Commits, CommitErrors uint64
}

// Stats returns a snapshot of the router's replicas and counters.
func (r *Router) Stats() Stats {
	now := r.now()
	s := Stats{Mode: r.cfg.Mode, PrimaryReads: r.primaryReads.Load(), NoReplica: r.noReplica.Load(),
		WaitTimeouts: r.waitTimeouts.Load(), Sticky: r.sticky.Load(), Commits: r.commits.Load(),
		CommitErrors: r.commitErrs.Load()}
	var pp Position
	if st := r.primary.state.Load(); st != nil {
		pp = st.pos
	}
	r.global.mu.Lock()
	pp = merge(pp, r.global.pos)
	r.global.mu.Unlock()
	s.PrimaryPosition = posString(pp)
	for _, n := range r.nodes {
		rs := ReplicaStats{Name: n.name, Usable: r.usable(n, now), Reads: n.reads.Load(), Waits: n.waits.Load(),
			WaitTimeouts: n.waitTimeouts.Load(), Errors: n.errs.Load(), WaitTime: time.Duration(n.waitNanos.Load())}
		if st := n.state.Load(); st != nil {
			rs.Position, rs.Lag, rs.LastError = posString(st.pos), st.lag, st.err
		}
		s.Replicas = append(s.Replicas, rs)
	}
	return s
}
