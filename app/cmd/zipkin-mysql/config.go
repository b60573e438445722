package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/memstore"
	"github.com/sqlpool/sqlpool/cluster"
)

// Defaults of the command.
const (
	defaultListen         = ":9411"
	defaultConnectTimeout = 10 * time.Second
	defaultDrainTimeout   = 30 * time.Second
	defaultMaxConns       = 10 // Zipkin's MYSQL_MAX_CONNECTIONS
	defaultIdleTimeout    = 30 * time.Second
	defaultMemMaxSpans    = memstore.DefaultMaxSpans // Zipkin's MEM_MAX_SPANS

	// maxHeaderBytes bounds the request line and headers of one request
	// (net/http answers 431 above it): 16 KiB, against net/http's 1 MiB,
	// so that many concurrent requests with huge headers cannot take the
	// memory of the process. Tracers send a few hundred bytes.
	maxHeaderBytes = 16 << 10
)

// config is the command's configuration after flags and Zipkin's
// environment variables are resolved.
type config struct {
	Listen string // address to listen on

	// Storage is "memory", "mysql", "embedded", "postgres" or "none" (see
	// resolveStorage); StorageSource says what chose it: "-storage",
	// "STORAGE_TYPE", "MySQL settings" or "default".
	Storage       string
	StorageSource string
	Pool          string // "sqlpool" or "database-sql"

	// MemMaxSpans bounds the memory store (MEM_MAX_SPANS; default
	// 500,000): past it the oldest traces are evicted whole.
	MemMaxSpans int

	// Embedded is true with Storage "embedded": the command starts the
	// in-process MySQL-protocol test server and creates the schema on it.
	Embedded bool
	// MySQL is the driver configuration of a real server (nil unless
	// Storage is "mysql"); DSNSource says where it came from: "-dsn",
	// "MYSQL_JDBC_URL" or "MYSQL_*" (Zipkin's defaults, localhost:3306
	// and database zipkin, for the variables not set).
	MySQL     *mysql.Config
	DSNSource string
	// Hosts are the database addresses (host:port) when the configuration
	// names several — MYSQL_HOST=h1,h2:3307 or a multi-host MYSQL_JDBC_URL
	// — in order; the command then connects through cluster.Connector
	// with HostStrategy, and MySQL.Addr is the first. nil for one host.
	Hosts []string
	// HostStrategy is how connections are spread over Hosts: what the
	// JDBC mode maps onto (sequential, plain and replication URLs:
	// Sequential; loadbalance and mariadb:failover: RoundRobin), Sequential
	// for a MYSQL_HOST list, or MYSQL_HOST_STRATEGY when set.
	HostStrategy cluster.Strategy
	// HostMode says what chose HostStrategy, e.g. "jdbc:mariadb:sequential",
	// "MYSQL_HOST" or "MYSQL_HOST_STRATEGY".
	HostMode string
	// AggregateDependencies keeps zipkin_dependencies current from the
	// write path (MYSQL_AGGREGATE_DEPENDENCIES; default true; see
	// mysqlstore.Options.DisableDependencyAggregation).
	AggregateDependencies bool
	// ReadReplicas are MariaDB GTID replicas of the database (host or
	// host:port, MYSQL_READ_REPLICAS, comma-separated; same user, password,
	// database and parameters) that serve the query API (replicas.go).
	// Empty: none.
	ReadReplicas []string
	// Galera turns on cluster.GaleraReady (MYSQL_GALERA=true): a node is
	// used only while it is Synced. Default false.
	Galera bool
	// Postgres is the postgres:// URL of the PostgreSQL server ("" unless
	// Storage is "postgres"); PostgresSource says where it came from
	// (postgres.go).
	Postgres       string
	PostgresSource string

	InitSchema bool
	// BackfillDependencies runs the dependency aggregator over the spans
	// already stored before serving (-backfill-dependencies).
	BackfillDependencies bool
	ConnectTimeout       time.Duration
	DrainTimeout         time.Duration
	IdleTimeout          time.Duration // keep-alive connections idle this long are closed
	MaxConns             int
	Writers              int // 0: chosen from MaxConns (1 on the embedded server)

	Lookback         int64 // QUERY_LOOKBACK, ms
	StrictTraceID    bool
	SearchEnabled    bool
	AutocompleteKeys []string
	SampleRate       float64 // COLLECTOR_SAMPLE_RATE, 0..1

	QueueSpans int
	QueueBytes int64

	// SpoolDir is the directory of the durable spool ("": none);
	// SpoolMaxBytes its bound (0: 1 GiB).
	SpoolDir      string
	SpoolMaxBytes int64
	LogFormat     string // "text" or "json"

	// Retention is the age past which spans are deleted (0: keep
	// everything); RetentionInterval the wait between deletion passes
	// (0: the store's default).
	Retention         time.Duration
	RetentionInterval time.Duration
	// Pprof is the address of a separate net/http/pprof listener with the
	// mutex and block profiles on ("" : none).
	Pprof string

	// Brokers are the Kafka and RabbitMQ collectors (brokers.go).
	Brokers brokerConfig

	// Warnings are things the user set that do not map (MYSQL_JDBC_URL
	// properties, variables overridden by -dsn); the command logs them.
	Warnings []string
}

// Password returns the configured MySQL password, for redaction.
func (c *config) Password() string {
	if c.Storage == "postgres" {
		return postgresPassword(c.Postgres)
	}
	if c.MySQL == nil {
		return ""
	}
	return c.MySQL.Passwd
}

// Addr describes the database without credentials: "host:3306/zipkin", or
// "h1:3306,h2:3306/zipkin" for several hosts.
func (c *config) Addr() string {
	switch {
	case c.Storage == "none":
		return "none"
	case c.Storage == "memory":
		return "memory"
	case c.Embedded:
		return "embedded"
	case c.Storage == "postgres":
		return postgresAddr(c.Postgres)
	}
	if len(c.Hosts) > 1 {
		return strings.Join(c.Hosts, ",") + "/" + c.MySQL.DBName
	}
	return c.MySQL.Addr + "/" + c.MySQL.DBName
}

// mysqlVars are the variables that select a real MySQL server; without any
// of them (and without -dsn, MYSQL_JDBC_URL and STORAGE_TYPE=mysql) the
// command stores spans in memory.
var mysqlVars = []string{"MYSQL_HOST", "MYSQL_TCP_PORT", "MYSQL_DB", "MYSQL_USER", "MYSQL_PASS", "MYSQL_USE_SSL"}

// parseConfig resolves args (without the program name) and the environment
// read through getenv. Precedence: -dsn > MYSQL_JDBC_URL > MYSQL_*; -listen
// > QUERY_PORT > :9411. The error says what is wrong and what to do.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("zipkin-mysql", flag.ContinueOnError)
	fs.SetOutput(usage)
	listen := fs.String("listen", "", "address to listen on, e.g. :9411 or 127.0.0.1:0 (default: :QUERY_PORT, else :9411)")
	dsn := fs.String("dsn", "", "go-sql-driver/mysql DSN, e.g. 'zipkin:secret@tcp(db:3306)/zipkin'; overrides MYSQL_JDBC_URL and MYSQL_*")
	fs.StringVar(&c.Storage, "storage", "", "memory (in-process store, like Zipkin's STORAGE_TYPE=mem: the newest MEM_MAX_SPANS spans, default 500000, oldest traces evicted past it, lost on exit), mysql (the server of -dsn, MYSQL_JDBC_URL or MYSQL_*; Zipkin's defaults localhost:3306/zipkin), embedded (an in-process MySQL-protocol test server: the MySQL code path, slow past a few thousand spans, lost on exit), postgres (the PostgreSQL server of -postgres-dsn, POSTGRES_DSN or POSTGRES_*) or none (accept and drop, for load comparisons) (default: STORAGE_TYPE (mem, mysql or postgres), else mysql when -dsn, MYSQL_JDBC_URL or a MYSQL_* server variable is set, else memory)")
	pgDSN := fs.String("postgres-dsn", "", "with -storage=postgres: the server's URL, e.g. postgres://zipkin:secret@db:5432/zipkin?sslmode=disable; overrides POSTGRES_DSN and POSTGRES_*")
	fs.StringVar(&c.Pool, "pool", "sqlpool", "connection pool: sqlpool, or database-sql (plain database/sql with the same connection limit)")
	fs.BoolVar(&c.InitSchema, "init-schema", false, "create Zipkin's tables when they do not exist (always done on the embedded server)")
	fs.BoolVar(&c.BackfillDependencies, "backfill-dependencies", false, "before serving, count the spans already stored into zipkin_dependencies with the dependency aggregator (for days stored before its tables existed, or by a bulk loader); reads every trace once")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", defaultConnectTimeout, "how long start-up tries to reach the database")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", defaultDrainTimeout, "on SIGTERM, how long queued spans may take to be written before they are dropped")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", defaultIdleTimeout, "close keep-alive HTTP connections idle this long")
	fs.IntVar(&c.Writers, "writers", 0, "storage writer goroutines (default: MYSQL_MAX_CONNECTIONS/2, 1 to 4; 1 on the embedded server)")
	fs.IntVar(&c.QueueSpans, "queue-spans", 0, "ingest queue bound in spans (default 20000)")
	fs.Int64Var(&c.QueueBytes, "queue-bytes", 0, "ingest queue bound in decoded body bytes (default 64 MiB)")
	fs.StringVar(&c.SpoolDir, "spool-dir", "", "directory of a durable spool: a POST is answered 202 only once its spans are on disk there, and they survive crashes and restarts until stored (default: none)")
	fs.Int64Var(&c.SpoolMaxBytes, "spool-max-bytes", 0, "bound of the spool on disk, in bytes (default 1 GiB); a full spool answers 503")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&c.Retention, "retention", 0, "delete spans (and their annotations) older than this, e.g. 168h, in small batches while ingest goes on (default: keep everything)")
	fs.DurationVar(&c.RetentionInterval, "retention-interval", 0, "wait between retention passes (default: 1m, or -retention/10 when shorter)")
	fs.StringVar(&c.Pprof, "pprof", "", "address of a separate net/http/pprof listener with mutex and block profiling on, e.g. 127.0.0.1:6060 (default: off)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: flags only (see -h)", fs.Arg(0))
	}
	storageSet := false
	fs.Visit(func(f *flag.Flag) { storageSet = storageSet || f.Name == "storage" })
	if storageSet {
		switch c.Storage {
		case "memory", "mysql", "embedded", "postgres", "none":
		default:
			return nil, fmt.Errorf("-storage=%s: use memory, mysql, embedded, postgres or none", c.Storage)
		}
	}
	switch c.Pool {
	case "sqlpool", "database-sql":
	default:
		return nil, fmt.Errorf("-pool=%s: use sqlpool or database-sql", c.Pool)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return nil, fmt.Errorf("-log-format=%s: use text or json", c.LogFormat)
	}
	if c.ConnectTimeout <= 0 {
		return nil, fmt.Errorf("-connect-timeout=%s: use a positive duration such as 10s", c.ConnectTimeout)
	}
	if c.DrainTimeout <= 0 {
		return nil, fmt.Errorf("-drain-timeout=%s: use a positive duration such as 30s", c.DrainTimeout)
	}
	if c.IdleTimeout <= 0 {
		return nil, fmt.Errorf("-idle-timeout=%s: use a positive duration such as 30s", c.IdleTimeout)
	}
	if c.Retention < 0 || c.RetentionInterval < 0 {
		return nil, errors.New("-retention and -retention-interval must not be negative (0 means off / the default)")
	}
	if c.Writers < 0 || c.QueueSpans < 0 || c.QueueBytes < 0 || c.SpoolMaxBytes < 0 {
		return nil, errors.New("-writers, -queue-spans, -queue-bytes and -spool-max-bytes must not be negative (0 is the default)")
	}

	// Listen address.
	switch {
	case *listen != "":
		c.Listen = *listen
		if p := getenv("QUERY_PORT"); p != "" {
			c.Warnings = append(c.Warnings, "QUERY_PORT="+p+" is ignored: -listen is set")
		}
	case getenv("QUERY_PORT") != "":
		p := getenv("QUERY_PORT")
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("QUERY_PORT=%q is not a port number (0-65535)", p)
		}
		c.Listen = ":" + p
	default:
		c.Listen = defaultListen
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return nil, fmt.Errorf("-listen=%q is not host:port (%v): use e.g. :9411 or 127.0.0.1:0", c.Listen, err)
	}

	// Zipkin's query and collector settings.
	var err error
	if c.MaxConns, err = envInt(getenv, "MYSQL_MAX_CONNECTIONS", defaultMaxConns); err != nil {
		return nil, err
	}
	if c.MaxConns <= 0 {
		return nil, fmt.Errorf("MYSQL_MAX_CONNECTIONS=%d: use a positive number (Zipkin's default is 10)", c.MaxConns)
	}
	lookback, err := envInt(getenv, "QUERY_LOOKBACK", 86_400_000)
	if err != nil {
		return nil, err
	}
	if lookback <= 0 {
		return nil, fmt.Errorf("QUERY_LOOKBACK=%d: use a positive number of milliseconds (default 86400000, one day)", lookback)
	}
	c.Lookback = int64(lookback)
	if c.StrictTraceID, err = envBool(getenv, "STRICT_TRACE_ID", true); err != nil {
		return nil, err
	}
	if c.SearchEnabled, err = envBool(getenv, "SEARCH_ENABLED", true); err != nil {
		return nil, err
	}
	for _, k := range strings.Split(getenv("AUTOCOMPLETE_KEYS"), ",") {
		if k = strings.TrimSpace(k); k != "" {
			c.AutocompleteKeys = append(c.AutocompleteKeys, k)
		}
	}
	c.SampleRate = 1
	if v := getenv("COLLECTOR_SAMPLE_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("COLLECTOR_SAMPLE_RATE=%q: use a number from 0 (keep only debug spans) to 1 (keep all)", v)
		}
		c.SampleRate = r
	}

	if c.AggregateDependencies, err = envBool(getenv, "MYSQL_AGGREGATE_DEPENDENCIES", true); err != nil {
		return nil, err
	}
	c.ReadReplicas = parseReadReplicas(getenv)
	if c.Brokers, err = parseBrokers(getenv); err != nil {
		return nil, err
	}

	// The storage: -storage > STORAGE_TYPE > mysql when a MySQL server
	// is configured > memory.
	jdbc := getenv("MYSQL_JDBC_URL")
	var setVars []string
	for _, v := range mysqlVars {
		if getenv(v) != "" {
			setVars = append(setVars, v)
		}
	}
	var mysqlSettings []string // what configures a MySQL server
	if *dsn != "" {
		mysqlSettings = append(mysqlSettings, "-dsn")
	}
	if jdbc != "" {
		mysqlSettings = append(mysqlSettings, "MYSQL_JDBC_URL")
	}
	mysqlSettings = append(mysqlSettings, setVars...)
	if err := c.resolveStorage(storageSet, getenv("STORAGE_TYPE"), len(mysqlSettings) > 0); err != nil {
		return nil, err
	}
	if v := getenv("MEM_MAX_SPANS"); v != "" && c.Storage != "memory" {
		c.Warnings = append(c.Warnings, "MEM_MAX_SPANS is ignored: the storage is "+c.Storage+", not memory")
	}
	if c.MemMaxSpans, err = envInt(getenv, "MEM_MAX_SPANS", defaultMemMaxSpans); err != nil {
		return nil, err
	}
	if c.MemMaxSpans <= 0 {
		return nil, fmt.Errorf("MEM_MAX_SPANS=%d: use a positive number of spans (default %d)", c.MemMaxSpans, defaultMemMaxSpans)
	}
	if c.Storage == "postgres" {
		if len(mysqlSettings) > 0 {
			c.Warnings = append(c.Warnings, strings.Join(mysqlSettings, ", ")+" ignored: the storage is postgres ("+c.StorageSource+")")
		}
		return c, c.resolvePostgres(*pgDSN, getenv)
	}
	if c.Storage != "mysql" {
		if len(mysqlSettings) > 0 {
			c.Warnings = append(c.Warnings, strings.Join(mysqlSettings, ", ")+" ignored: the storage is "+c.Storage+" ("+c.StorageSource+")")
		}
		if c.InitSchema && (c.Storage == "memory" || c.Storage == "none") {
			c.Warnings = append(c.Warnings, "-init-schema is ignored: the storage is "+c.Storage+" ("+c.StorageSource+"), which has no schema")
		}
		c.Embedded = c.Storage == "embedded"
		return c, nil
	}

	// The database: -dsn > MYSQL_JDBC_URL > MYSQL_* (Zipkin's defaults for
	// those not set).
	switch {
	case *dsn != "":
		m, err := mysql.ParseDSN(*dsn)
		if err != nil {
			return nil, fmt.Errorf("-dsn is not a go-sql-driver/mysql DSN (%v): use user:password@tcp(host:3306)/zipkin", err)
		}
		c.MySQL, c.DSNSource = m, "-dsn"
		if jdbc != "" {
			c.Warnings = append(c.Warnings, "MYSQL_JDBC_URL is ignored: -dsn is set")
		}
		if len(setVars) > 0 {
			c.Warnings = append(c.Warnings, strings.Join(setVars, ", ")+" ignored: -dsn is set")
		}
	case jdbc != "":
		m, hosts, warns, err := parseJDBCURL(jdbc, getenv)
		if err != nil {
			return nil, err
		}
		c.MySQL, c.DSNSource = m, "MYSQL_JDBC_URL"
		c.Warnings = append(c.Warnings, warns...)
		c.setHosts(hosts.addrs, hosts.strategy, hosts.mode)
	default:
		m, hosts, err := mysqlFromEnv(getenv)
		if err != nil {
			return nil, err
		}
		c.MySQL, c.DSNSource = m, "MYSQL_*"
		c.setHosts(hosts, cluster.Sequential, "MYSQL_HOST")
	}
	if v := strings.TrimSpace(getenv("MYSQL_HOST_STRATEGY")); v != "" {
		st, err := parseStrategy(v)
		if err != nil {
			return nil, err
		}
		if len(c.Hosts) < 2 {
			c.Warnings = append(c.Warnings, "MYSQL_HOST_STRATEGY="+v+" is ignored: one database host is configured")
		} else {
			c.HostStrategy, c.HostMode = st, "MYSQL_HOST_STRATEGY"
		}
	}
	if c.Galera, err = envBool(getenv, "MYSQL_GALERA", false); err != nil {
		return nil, err
	}
	if c.MySQL.Timeout == 0 {
		c.MySQL.Timeout = c.ConnectTimeout
	}
	if c.MySQL.DBName == "" {
		return nil, fmt.Errorf("no database named in %s: name one (…/zipkin), as Zipkin's MYSQL_DB", c.DSNSource)
	}
	return c, nil
}

// resolveStorage sets c.Storage and c.StorageSource. Precedence: -storage
// (when set: already checked) > Zipkin's STORAGE_TYPE (mem or mysql; any
// other value, such as cassandra3 or elasticsearch, is an error, as this
// server has no such storage) > mysql when mysqlConfigured (-dsn,
// MYSQL_JDBC_URL or a MYSQL_* server variable) > memory, as Zipkin's
// server defaults to STORAGE_TYPE=mem.
func (c *config) resolveStorage(flagSet bool, storageType string, mysqlConfigured bool) error {
	storageType = strings.TrimSpace(storageType)
	if flagSet {
		c.StorageSource = "-storage"
		if storageType != "" {
			c.Warnings = append(c.Warnings, "STORAGE_TYPE="+storageType+" is ignored: -storage="+c.Storage+" is set")
		}
		return nil
	}
	switch strings.ToLower(storageType) {
	case "":
	case "mem":
		c.Storage, c.StorageSource = "memory", "STORAGE_TYPE"
		return nil
	case "mysql":
		c.Storage, c.StorageSource = "mysql", "STORAGE_TYPE"
		return nil
	case "postgres", "postgresql":
		c.Storage, c.StorageSource = "postgres", "STORAGE_TYPE"
		return nil
	default:
		return fmt.Errorf("STORAGE_TYPE=%s is not supported here: use mem, mysql or postgres (or -storage=memory, mysql, embedded, postgres or none)", storageType)
	}
	if mysqlConfigured {
		c.Storage, c.StorageSource = "mysql", "MySQL settings"
	} else {
		c.Storage, c.StorageSource = "memory", "default"
	}
	return nil
}

// setHosts records several hosts (one host needs no cluster connector).
func (c *config) setHosts(addrs []string, st cluster.Strategy, mode string) {
	if len(addrs) > 1 {
		c.Hosts, c.HostStrategy, c.HostMode = addrs, st, mode
	}
}

// parseStrategy reads MYSQL_HOST_STRATEGY.
func parseStrategy(v string) (cluster.Strategy, error) {
	switch strings.ToLower(v) {
	case "sequential", "failover":
		return cluster.Sequential, nil
	case "round-robin", "roundrobin", "loadbalance":
		return cluster.RoundRobin, nil
	case "least-connections", "leastconnections":
		return cluster.LeastConnections, nil
	}
	return 0, fmt.Errorf("MYSQL_HOST_STRATEGY=%q: use sequential (the first healthy host, the others as fallbacks), round-robin or least-connections", v)
}

// parseHostList splits a comma-separated host list (h1,h2:3307,[::1]:3308)
// into host:port addresses, defaultPort where a host has none. what names
// the setting in errors.
func parseHostList(list, defaultPort, what string) ([]string, error) {
	parts := strings.Split(list, ",")
	addrs := make([]string, 0, len(parts))
	for i, h := range parts {
		h = strings.TrimSpace(h)
		bad := func(why string) error {
			return fmt.Errorf("%s: host %d (%q) %s: list hosts as h1,h2:3307,[::1]:3308", what, i+1, h, why)
		}
		if h == "" {
			return nil, bad("is empty")
		}
		if strings.ContainsAny(h, "()=/?@ ") {
			return nil, bad("is not a host name or host:port (Connector/J's address=(host=…)(port=…) and (host=…,port=…) forms are not supported)")
		}
		host, port := h, defaultPort
		switch {
		case strings.HasPrefix(h, "["): // [v6] or [v6]:port
			end := strings.Index(h, "]")
			if end < 0 {
				return nil, bad("has no closing ]")
			}
			host = h[1:end]
			if rest := h[end+1:]; rest != "" {
				p, ok := strings.CutPrefix(rest, ":")
				if !ok {
					return nil, bad("has text after ] that is not :port")
				}
				port = p
			}
		case strings.Count(h, ":") == 1:
			host, port, _ = strings.Cut(h, ":")
		}
		if host == "" {
			return nil, bad("has no host name")
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, bad(fmt.Sprintf("has port %q, not a number from 1 to 65535", port))
		}
		addr := net.JoinHostPort(host, port)
		if slices.Contains(addrs, addr) {
			return nil, bad("is listed twice")
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// mysqlFromEnv builds the driver configuration from Zipkin's MYSQL_*
// variables, with Zipkin's defaults (localhost:3306, database zipkin).
// MYSQL_HOST may list several hosts (h1,h2:3307), each with
// MYSQL_TCP_PORT unless it names its own port; they are returned in order
// and the configuration's Addr is the first.
func mysqlFromEnv(getenv func(string) string) (*mysql.Config, []string, error) {
	m := mysql.NewConfig()
	port := or(getenv("MYSQL_TCP_PORT"), "3306")
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return nil, nil, fmt.Errorf("MYSQL_TCP_PORT=%q is not a port number", port)
	}
	hosts, err := parseHostList(or(getenv("MYSQL_HOST"), "localhost"), port, "MYSQL_HOST="+getenv("MYSQL_HOST"))
	if err != nil {
		return nil, nil, err
	}
	m.Net = "tcp"
	m.Addr = hosts[0]
	m.DBName = or(getenv("MYSQL_DB"), "zipkin")
	m.User = getenv("MYSQL_USER")
	m.Passwd = getenv("MYSQL_PASS")
	useSSL, err := envBool(getenv, "MYSQL_USE_SSL", false)
	if err != nil {
		return nil, nil, err
	}
	if useSSL {
		// Verified TLS against the system's roots, as Zipkin's useSSL=true.
		m.TLSConfig = "true"
	}
	return m, hosts, nil
}

// jdbcHosts are the hosts of a MYSQL_JDBC_URL and what its mode maps onto.
type jdbcHosts struct {
	addrs    []string
	strategy cluster.Strategy
	mode     string // "jdbc:" + scheme
}

// parseJDBCURL maps Zipkin's MYSQL_JDBC_URL (jdbc:mysql://host:port/db?props
// or jdbc:mariadb://…, optionally with user[:password]@ before the hosts) to
// the driver's configuration. Credentials in the URL win over MYSQL_USER/MYSQL_PASS (which Zipkin also applies to the
// URL). Properties that do not map are returned as warnings.
//
// Several hosts (h1,h2:3307,…, 3306 where a host has no port) are returned
// with the strategy Connector/J's mode maps onto:
//
//   - jdbc:mysql://h1,h2/… and jdbc:mariadb://h1,h2/… (Connector/J's
//     plain multi-host URL: failover to the next host), jdbc:mariadb:sequential
//     and jdbc:mysql:failover: cluster.Sequential, the first healthy host
//     in order, connections moving back to an earlier host when it returns.
//   - jdbc:mysql:loadbalance, jdbc:mariadb:loadbalance and
//     jdbc:mariadb:failover (MariaDB's failover mode picks a host at
//     random per connection): cluster.RoundRobin, connections spread
//     evenly over the healthy hosts.
//   - jdbc:mysql:replication and jdbc:mariadb:replication:
//     cluster.Sequential with a warning: every statement goes to the first
//     healthy host; reads are not sent to replicas.
func parseJDBCURL(raw string, getenv func(string) string) (*mysql.Config, jdbcHosts, []string, error) {
	var none jdbcHosts
	bad := func(why string) error {
		return fmt.Errorf("MYSQL_JDBC_URL is not a MySQL JDBC URL (%s): use jdbc:mysql://host:3306/zipkin?user=…&password=…, or with several hosts jdbc:mariadb:sequential://h1:3306,h2:3306/zipkin", why)
	}
	rest, ok := strings.CutPrefix(raw, "jdbc:")
	if !ok {
		return nil, none, nil, bad("it does not start with jdbc:")
	}
	scheme, rest, ok := strings.Cut(rest, "://")
	if !ok {
		return nil, none, nil, bad("no ://")
	}
	var warns []string
	hosts := jdbcHosts{mode: "jdbc:" + scheme, strategy: cluster.Sequential}
	switch scheme {
	case "mysql", "mariadb", "mariadb:sequential", "mysql:failover":
	case "mysql:loadbalance", "mariadb:loadbalance", "mariadb:failover":
		hosts.strategy = cluster.RoundRobin
	case "mysql:replication", "mariadb:replication":
		warns = append(warns, "MYSQL_JDBC_URL: jdbc:"+scheme+" runs as sequential: every statement goes to the first healthy host; reads are not sent to replicas")
	default:
		return nil, none, nil, bad("unknown scheme jdbc:" + scheme + "; supported: jdbc:mysql, jdbc:mariadb, and the multi-host modes jdbc:mysql:loadbalance, jdbc:mysql:replication, jdbc:mariadb:sequential, jdbc:mariadb:loadbalance, jdbc:mariadb:failover, jdbc:mariadb:replication")
	}
	hostPart, pathQuery, _ := strings.Cut(rest, "/")
	dbName, query, _ := strings.Cut(pathQuery, "?")
	// Connector/J's user:password@ before the hosts: credentials, never
	// part of the address that errors, /info and /health print.
	var userInfo string
	if at := strings.LastIndex(hostPart, "@"); at >= 0 {
		userInfo, hostPart = hostPart[:at], hostPart[at+1:]
	}
	if hostPart == "" {
		hostPart = "localhost"
	}
	addrs, err := parseHostList(hostPart, "3306", "MYSQL_JDBC_URL")
	if err != nil {
		return nil, none, nil, err
	}
	hosts.addrs = addrs
	props, err := url.ParseQuery(query)
	if err != nil {
		// The error quotes the bad escape, which may be part of a password.
		return nil, none, nil, bad("a property has an invalid %-escape")
	}
	m := mysql.NewConfig()
	m.Net = "tcp"
	m.Addr = addrs[0]
	if m.DBName, err = url.PathUnescape(dbName); err != nil {
		return nil, none, nil, bad("database name: " + err.Error())
	}
	m.User, m.Passwd = getenv("MYSQL_USER"), getenv("MYSQL_PASS")
	if userInfo != "" {
		u, p, hasPass := strings.Cut(userInfo, ":")
		if m.User, err = url.PathUnescape(u); err != nil {
			return nil, none, nil, bad("the user before @ has an invalid %-escape")
		}
		if hasPass {
			if m.Passwd, err = url.PathUnescape(p); err != nil {
				return nil, none, nil, bad("the password before @ has an invalid %-escape")
			}
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	noVerify := false
	for _, k := range keys {
		v := props.Get(k)
		msMapped := func(set func(time.Duration)) {
			ms, err := strconv.Atoi(v)
			if err != nil || ms < 0 {
				warns = append(warns, "MYSQL_JDBC_URL: "+k+"="+v+" is not a number of milliseconds; ignored")
				return
			}
			set(time.Duration(ms) * time.Millisecond)
		}
		switch strings.ToLower(k) {
		case "user":
			m.User = v
		case "password":
			m.Passwd = v
		case "usessl", "requiressl":
			if b, err := strconv.ParseBool(v); err == nil {
				if b {
					m.TLSConfig = "true"
				} else if m.TLSConfig == "" {
					m.TLSConfig = "false"
				}
			}
		case "trustservercertificate", "verifyservercertificate":
			b, err := strconv.ParseBool(v)
			if err == nil && b == (strings.ToLower(k) == "trustservercertificate") {
				noVerify = true
			}
		case "sslmode":
			switch strings.ToUpper(v) {
			case "DISABLED", "DISABLE":
				m.TLSConfig = "false"
			case "PREFERRED", "PREFER":
				m.TLSConfig = "preferred"
			case "REQUIRED", "TRUST":
				m.TLSConfig = "skip-verify"
			default: // VERIFY_CA, VERIFY_IDENTITY, VERIFY-FULL, …
				m.TLSConfig = "true"
			}
		case "connecttimeout":
			msMapped(func(d time.Duration) { m.Timeout = d })
		case "sockettimeout":
			msMapped(func(d time.Duration) { m.ReadTimeout, m.WriteTimeout = d, d })
		case "characterencoding", "useunicode", "autoreconnect":
			warns = append(warns, "MYSQL_JDBC_URL: "+k+"="+v+" is not needed here (utf8mb4 is used; the pool reconnects); ignored")
		default:
			warns = append(warns, "MYSQL_JDBC_URL: property "+k+" has no equivalent here; ignored")
		}
	}
	if noVerify && m.TLSConfig == "true" {
		m.TLSConfig = "skip-verify"
	}
	// MYSQL_USE_SSL applies only when the URL says nothing about TLS.
	if m.TLSConfig == "" {
		if b, _ := envBool(getenv, "MYSQL_USE_SSL", false); b {
			m.TLSConfig = "true"
		}
	}
	return m, hosts, warns, nil
}

func envInt(getenv func(string) string, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a whole number", name, v)
	}
	return n, nil
}

func envBool(getenv func(string) string, name string, def bool) (bool, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%s=%q: use true or false", name, v)
	}
	return b, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
