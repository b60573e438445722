package pool

// Dialect returns the dialect the pool uses: Config.Dialect, or the one New chose for the
// connector when that was nil. Package retry reads errors with it (retry.Policy.Dialect).
func (p *Pool) Dialect() Dialect { return p.dialect }

// Dialect returns the pool's dialect, so that a *sql.DB over the pool (sql.DB.Driver returns this
// driver) leads to it: retry.Tx finds it so.
func (d poolDriver) Dialect() Dialect { return d.p.dialect }
