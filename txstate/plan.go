package txstate

// Action is what a pool must do with a connection at release.
type Action uint8

const (
	// ActionNone means the session is at its baseline: put the connection
	// back without a round trip. It is the zero value.
	ActionNone Action = iota
	// ActionReset means run Plan.Statements, in order, then call
	// Tracker.Done; if any of them fails, close the connection.
	ActionReset
	// ActionDiscard means no statements can restore the baseline (or the
	// state is unknown): close the connection.
	ActionDiscard
)

// String returns "none", "reset" or "discard".
func (a Action) String() string {
	switch a {
	case ActionNone:
		return "none"
	case ActionReset:
		return "reset"
	case ActionDiscard:
		return "discard"
	}
	return "Action(" + itoa(int(a)) + ")"
}

// Plan is the cheapest way back to the baseline, as Tracker.Plan returns it.
type Plan struct {
	// Action says what to do.
	Action Action
	// Statements, for ActionReset, are the statements to run in order, one
	// per round trip (go-sql-driver/mysql turns multi-statements off by
	// default, so they are never joined with ';'). ROLLBACK comes first,
	// since SET autocommit=1 and UNLOCK TABLES commit implicitly; related
	// settings share one SET. The slice belongs to the Tracker and is valid
	// until its next method call.
	Statements []string
	// Reason says why, for logs: the causes, comma-separated, such as
	// "open transaction, table locks"; "" for ActionNone.
	Reason string
}
