package main

import (
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/cluster"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig(nil, envFunc(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":9411" || c.Embedded || c.MySQL != nil || c.Pool != "sqlpool" || c.Storage != "memory" ||
		c.StorageSource != "default" || c.MemMaxSpans != 500_000 || c.Addr() != "memory" ||
		c.ConnectTimeout != 10*time.Second || c.MaxConns != 10 || c.Lookback != 86_400_000 ||
		!c.StrictTraceID || !c.SearchEnabled || c.SampleRate != 1 || len(c.Warnings) != 0 {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestParseConfigZipkinEnv(t *testing.T) {
	c, err := parseConfig(nil, envFunc(
		"MYSQL_HOST", "db.example", "MYSQL_TCP_PORT", "3307", "MYSQL_DB", "traces", "MYSQL_USER", "zu", "MYSQL_PASS", "zp",
		"MYSQL_MAX_CONNECTIONS", "4", "MYSQL_USE_SSL", "true", "QUERY_PORT", "9412", "QUERY_LOOKBACK", "3600000",
		"STRICT_TRACE_ID", "false", "SEARCH_ENABLED", "false", "AUTOCOMPLETE_KEYS", "env, http.method,",
		"COLLECTOR_SAMPLE_RATE", "0.25"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := c.MySQL
	if c.Embedded || c.DSNSource != "MYSQL_*" || m.Addr != "db.example:3307" || m.DBName != "traces" || m.User != "zu" ||
		m.Passwd != "zp" || m.TLSConfig != "true" || m.Timeout != 10*time.Second {
		t.Fatalf("mysql: %+v %+v", c, m)
	}
	if c.Listen != ":9412" || c.MaxConns != 4 || c.Lookback != 3_600_000 || c.StrictTraceID || c.SearchEnabled ||
		!reflect.DeepEqual(c.AutocompleteKeys, []string{"env", "http.method"}) || c.SampleRate != 0.25 {
		t.Fatalf("query/collector: %+v", c)
	}
	if c.Password() != "zp" || strings.Contains(c.Addr(), "zp") {
		t.Fatalf("Password %q Addr %q", c.Password(), c.Addr())
	}
}

func TestParseConfigPrecedence(t *testing.T) {
	env := envFunc("MYSQL_HOST", "envhost", "MYSQL_JDBC_URL", "jdbc:mysql://jdbchost:3310/jdb?user=ju&password=jp", "QUERY_PORT", "1234")
	// -dsn wins over both, with warnings; -listen over QUERY_PORT.
	c, err := parseConfig([]string{"-dsn", "du:dp@tcp(dsnhost:3306)/ddb", "-listen", "127.0.0.1:0"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DSNSource != "-dsn" || c.MySQL.Addr != "dsnhost:3306" || c.MySQL.User != "du" || c.Listen != "127.0.0.1:0" || len(c.Warnings) != 3 {
		t.Fatalf("-dsn: %+v %v", c.MySQL, c.Warnings)
	}
	// MYSQL_JDBC_URL wins over MYSQL_*.
	c, err = parseConfig(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DSNSource != "MYSQL_JDBC_URL" || c.MySQL.Addr != "jdbchost:3310" || c.MySQL.DBName != "jdb" ||
		c.MySQL.User != "ju" || c.MySQL.Passwd != "jp" || c.Listen != ":1234" {
		t.Fatalf("jdbc: %+v", c.MySQL)
	}
}

func TestParseJDBCURL(t *testing.T) {
	c, err := parseConfig(nil, envFunc("MYSQL_USER", "envuser", "MYSQL_PASS", "envpass", "MYSQL_JDBC_URL",
		"jdbc:mysql://h1:3306,h2:3306/zipkin?autoReconnect=true&useSSL=true&trustServerCertificate=true&connectTimeout=2500&socketTimeout=30000&cachePrepStmts=true"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := c.MySQL
	if m.Addr != "h1:3306" || m.DBName != "zipkin" || m.User != "envuser" || m.Passwd != "envpass" ||
		m.TLSConfig != "skip-verify" || m.Timeout != 2500*time.Millisecond || m.ReadTimeout != 30*time.Second {
		t.Fatalf("%+v", m)
	}
	joined := strings.Join(c.Warnings, "\n")
	for _, w := range []string{"autoReconnect", "property cachePrepStmts has no equivalent"} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}
	if !reflect.DeepEqual(c.Hosts, []string{"h1:3306", "h2:3306"}) || c.HostStrategy != cluster.Sequential || c.HostMode != "jdbc:mysql" {
		t.Errorf("two hosts in a plain URL: Hosts %q, strategy %v (%s), want h1:3306,h2:3306 sequential", c.Hosts, c.HostStrategy, c.HostMode)
	}
	for _, bad := range []string{"mysql://h/db", "jdbc:postgresql://h/db", "jdbc:mysql:h/db"} {
		if _, err := parseConfig(nil, envFunc("MYSQL_JDBC_URL", bad), io.Discard); err == nil || !strings.Contains(err.Error(), "MYSQL_JDBC_URL") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	c, err = parseConfig(nil, envFunc("MYSQL_JDBC_URL", "jdbc:mariadb://[::1]/zipkin?sslMode=VERIFY_IDENTITY"), io.Discard)
	if err != nil || c.MySQL.Addr != "[::1]:3306" || c.MySQL.TLSConfig != "true" {
		t.Fatalf("%v %+v", err, c.MySQL)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"-pool=hikari"}, nil, "-pool=hikari: use sqlpool or database-sql"},
		{[]string{"-storage=cassandra"}, nil, "-storage=cassandra: use memory, mysql, embedded, postgres or none"},
		{nil, []string{"STORAGE_TYPE", "cassandra3"}, "STORAGE_TYPE=cassandra3 is not supported here: use mem, mysql or postgres"},
		{nil, []string{"STORAGE_TYPE", "elasticsearch", "MYSQL_HOST", "db"}, "STORAGE_TYPE=elasticsearch is not supported here"},
		{nil, []string{"MEM_MAX_SPANS", "0"}, "MEM_MAX_SPANS=0: use a positive number of spans"},
		{nil, []string{"MEM_MAX_SPANS", "many"}, `MEM_MAX_SPANS="many" is not a whole number`},
		{[]string{"-listen", "9411"}, nil, "is not host:port"},
		{[]string{"-connect-timeout", "0s"}, nil, "use a positive duration"},
		{[]string{"-dsn", "nope"}, nil, "-dsn is not a go-sql-driver/mysql DSN"},
		{nil, []string{"MYSQL_TCP_PORT", "x"}, `MYSQL_TCP_PORT="x" is not a port number`},
		{nil, []string{"MYSQL_MAX_CONNECTIONS", "0"}, "use a positive number"},
		{nil, []string{"MYSQL_USE_SSL", "yes please"}, "MYSQL_USE_SSL"},
		{nil, []string{"COLLECTOR_SAMPLE_RATE", "1.5"}, "COLLECTOR_SAMPLE_RATE"},
		{nil, []string{"STRICT_TRACE_ID", "maybe"}, "use true or false"},
		{nil, []string{"QUERY_PORT", "99999"}, "QUERY_PORT"},
	} {
		_, err := parseConfig(c.args, envFunc(c.env...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %q", c.args, c.env, err, c.want)
		}
	}
	// -storage=none needs no database at all.
	c, err := parseConfig([]string{"-storage=none"}, envFunc("MYSQL_HOST", "db"), io.Discard)
	if err != nil || c.Embedded || c.MySQL != nil {
		t.Fatalf("%v %+v", err, c)
	}
}

// Connector/J accepts credentials before the host
// (jdbc:mysql://user:password@host:3306/db): they are credentials, never
// part of the address that errors, /info and /health print, and an invalid
// URL is reported without quoting them.
func TestParseJDBCURLUserInfo(t *testing.T) {
	c, err := parseConfig(nil, envFunc("MYSQL_PASS", "envpass", "MYSQL_JDBC_URL", "jdbc:mysql://ju:S3cret%40x@db:3307/zipkin"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := c.MySQL
	if m.Addr != "db:3307" || m.User != "ju" || m.Passwd != "S3cret@x" || m.DBName != "zipkin" {
		t.Fatalf("%+v", m)
	}
	if strings.Contains(c.Addr(), "S3cret") || c.Password() != "S3cret@x" {
		t.Fatalf("Addr %q Password %q", c.Addr(), c.Password())
	}
	// A user without a password keeps MYSQL_PASS, as with ?user=.
	c, err = parseConfig(nil, envFunc("MYSQL_PASS", "envpass", "MYSQL_JDBC_URL", "jdbc:mysql://ju@db/zipkin"), io.Discard)
	if err != nil || c.MySQL.Addr != "db:3306" || c.MySQL.User != "ju" || c.MySQL.Passwd != "envpass" {
		t.Fatalf("%v %+v", err, c.MySQL)
	}
	for _, bad := range []string{
		"jdbc:mysql://db/zipkin?user=u&password=S3cret%zz",
		"jdbc:mysql://u:S3cret%zz@db/zipkin",
	} {
		_, err := parseConfig(nil, envFunc("MYSQL_JDBC_URL", bad), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "MYSQL_JDBC_URL") || strings.Contains(err.Error(), "%zz") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// A TLS setting in MYSQL_JDBC_URL wins over MYSQL_USE_SSL, which applies
// only when the URL says nothing about TLS.
func TestJDBCURLTLSOverridesUseSSL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"jdbc:mysql://db/zipkin?useSSL=false", "false"},
		{"jdbc:mysql://db/zipkin?sslMode=DISABLED", "false"},
		{"jdbc:mysql://db/zipkin?useSSL=true", "true"},
		{"jdbc:mysql://db/zipkin", "true"},
	} {
		cfg, err := parseConfig(nil, envFunc("MYSQL_USE_SSL", "true", "MYSQL_JDBC_URL", c.url), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MySQL.TLSConfig != c.want {
			t.Errorf("%s with MYSQL_USE_SSL=true: tls=%q, want %q", c.url, cfg.MySQL.TLSConfig, c.want)
		}
	}
}

// The storage: -storage > STORAGE_TYPE (Zipkin's mem or mysql) > mysql
// when a MySQL server is configured > memory (Zipkin's default). What a
// storage other than mysql leaves unused is logged as ignored.
func TestParseConfigStorage(t *testing.T) {
	for _, tt := range []struct {
		name           string
		args, env      []string
		storage, from  string
		addr, warnings string // addr: c.Addr(); warnings: joined, "" for none
	}{
		{"nothing set", nil, nil, "memory", "default", "memory", ""},
		{"MYSQL_HOST", nil, []string{"MYSQL_HOST", "db"}, "mysql", "MySQL settings", "db:3306/zipkin", ""},
		{"MYSQL_JDBC_URL", nil, []string{"MYSQL_JDBC_URL", "jdbc:mysql://db/z"}, "mysql", "MySQL settings", "db:3306/z", ""},
		{"-dsn", []string{"-dsn", "u:p@tcp(db:3307)/z"}, nil, "mysql", "MySQL settings", "db:3307/z", ""},
		{"MYSQL_MAX_CONNECTIONS alone", nil, []string{"MYSQL_MAX_CONNECTIONS", "4"}, "memory", "default", "memory", ""},
		{"STORAGE_TYPE=mem", nil, []string{"STORAGE_TYPE", "mem"}, "memory", "STORAGE_TYPE", "memory", ""},
		{"STORAGE_TYPE=mem over MYSQL_*", nil, []string{"STORAGE_TYPE", "mem", "MYSQL_HOST", "db", "MYSQL_USER", "u"}, "memory", "STORAGE_TYPE", "memory",
			"MYSQL_HOST, MYSQL_USER ignored: the storage is memory (STORAGE_TYPE)"},
		// Zipkin's STORAGE_TYPE=mysql with nothing else: Zipkin's defaults.
		{"STORAGE_TYPE=mysql", nil, []string{"STORAGE_TYPE", "MySQL"}, "mysql", "STORAGE_TYPE", "localhost:3306/zipkin", ""},
		{"-storage=mysql", []string{"-storage=mysql"}, nil, "mysql", "-storage", "localhost:3306/zipkin", ""},
		{"-storage=embedded", []string{"-storage=embedded"}, nil, "embedded", "-storage", "embedded", ""},
		{"-storage=embedded over -dsn", []string{"-storage=embedded", "-dsn", "u:p@tcp(db)/z"}, nil, "embedded", "-storage", "embedded",
			"-dsn ignored: the storage is embedded (-storage)"},
		{"-storage over STORAGE_TYPE", []string{"-storage=memory"}, []string{"STORAGE_TYPE", "mysql"}, "memory", "-storage", "memory",
			"STORAGE_TYPE=mysql is ignored: -storage=memory is set"},
		{"-storage over a STORAGE_TYPE not supported", []string{"-storage=none"}, []string{"STORAGE_TYPE", "cassandra3"}, "none", "-storage", "none",
			"STORAGE_TYPE=cassandra3 is ignored: -storage=none is set"},
		{"-init-schema on memory", []string{"-init-schema"}, nil, "memory", "default", "memory",
			"-init-schema is ignored: the storage is memory (default), which has no schema"},
		{"-init-schema on embedded", []string{"-init-schema", "-storage=embedded"}, nil, "embedded", "-storage", "embedded", ""},
		{"MEM_MAX_SPANS on mysql", nil, []string{"MYSQL_HOST", "db", "MEM_MAX_SPANS", "10"}, "mysql", "MySQL settings", "db:3306/zipkin",
			"MEM_MAX_SPANS is ignored: the storage is mysql, not memory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, envFunc(tt.env...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Storage != tt.storage || c.StorageSource != tt.from || c.Addr() != tt.addr {
				t.Errorf("storage %q from %q at %q, want %q from %q at %q", c.Storage, c.StorageSource, c.Addr(), tt.storage, tt.from, tt.addr)
			}
			if c.Embedded != (tt.storage == "embedded") || (c.MySQL != nil) != (tt.storage == "mysql") {
				t.Errorf("Embedded %v, MySQL %v for storage %q", c.Embedded, c.MySQL, c.Storage)
			}
			if got := strings.Join(c.Warnings, "; "); got != tt.warnings {
				t.Errorf("warnings %q, want %q", got, tt.warnings)
			}
		})
	}
	c, err := parseConfig(nil, envFunc("MEM_MAX_SPANS", "1000"), io.Discard)
	if err != nil || c.MemMaxSpans != 1000 || len(c.Warnings) != 0 {
		t.Fatalf("MEM_MAX_SPANS=1000: %v %+v", err, c)
	}
}

// Every multi-host form maps onto the cluster connector's hosts and
// strategy; one host needs no cluster.
func TestParseConfigHosts(t *testing.T) {
	for _, c := range []struct {
		env      []string
		hosts    []string // nil: one host
		addr     string
		strategy cluster.Strategy
		mode     string
		warn     string
	}{
		{env: []string{"MYSQL_HOST", "h1,h2,h3"}, hosts: []string{"h1:3306", "h2:3306", "h3:3306"}, addr: "h1:3306", mode: "MYSQL_HOST"},
		{env: []string{"MYSQL_HOST", " h1:3307 , h2 ,[::1]:3308,10.0.0.4", "MYSQL_TCP_PORT", "3310"},
			hosts: []string{"h1:3307", "h2:3310", "[::1]:3308", "10.0.0.4:3310"}, addr: "h1:3307", mode: "MYSQL_HOST"},
		{env: []string{"MYSQL_HOST", "h1,h2", "MYSQL_HOST_STRATEGY", "least-connections"}, hosts: []string{"h1:3306", "h2:3306"},
			addr: "h1:3306", strategy: cluster.LeastConnections, mode: "MYSQL_HOST_STRATEGY"},
		{env: []string{"MYSQL_HOST", "db1"}, addr: "db1:3306"},
		{env: []string{"MYSQL_HOST", "db1", "MYSQL_HOST_STRATEGY", "round-robin"}, addr: "db1:3306", warn: "MYSQL_HOST_STRATEGY=round-robin is ignored"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mariadb:sequential://h1,h2:3307,h3/zipkin"}, hosts: []string{"h1:3306", "h2:3307", "h3:3306"},
			addr: "h1:3306", strategy: cluster.Sequential, mode: "jdbc:mariadb:sequential"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mysql:loadbalance://u:p@h1:3306,h2:3306/zipkin"}, hosts: []string{"h1:3306", "h2:3306"},
			addr: "h1:3306", strategy: cluster.RoundRobin, mode: "jdbc:mysql:loadbalance"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mariadb:loadbalance://h1,h2/zipkin"}, hosts: []string{"h1:3306", "h2:3306"},
			addr: "h1:3306", strategy: cluster.RoundRobin, mode: "jdbc:mariadb:loadbalance"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mariadb:failover://h1,h2/zipkin"}, hosts: []string{"h1:3306", "h2:3306"},
			addr: "h1:3306", strategy: cluster.RoundRobin, mode: "jdbc:mariadb:failover"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mysql://h1,h2/db"}, hosts: []string{"h1:3306", "h2:3306"},
			addr: "h1:3306", strategy: cluster.Sequential, mode: "jdbc:mysql"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mariadb://h1,[fe80::1]:3307/db"}, hosts: []string{"h1:3306", "[fe80::1]:3307"},
			addr: "h1:3306", strategy: cluster.Sequential, mode: "jdbc:mariadb"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mysql:replication://src,replica/db"}, hosts: []string{"src:3306", "replica:3306"},
			addr: "src:3306", strategy: cluster.Sequential, mode: "jdbc:mysql:replication", warn: "reads are not sent to replicas"},
		{env: []string{"MYSQL_JDBC_URL", "jdbc:mariadb:sequential://only:3307/db"}, addr: "only:3307"},
	} {
		cfg, err := parseConfig(nil, envFunc(c.env...), io.Discard)
		if err != nil {
			t.Errorf("%q: %v", c.env, err)
			continue
		}
		if !reflect.DeepEqual(cfg.Hosts, c.hosts) || cfg.MySQL.Addr != c.addr || cfg.Storage != "mysql" {
			t.Errorf("%q: Hosts %q Addr %s storage %s, want %q %s mysql", c.env, cfg.Hosts, cfg.MySQL.Addr, cfg.Storage, c.hosts, c.addr)
		}
		if c.hosts != nil && (cfg.HostStrategy != c.strategy || cfg.HostMode != c.mode) {
			t.Errorf("%q: strategy %v (%s), want %v (%s)", c.env, cfg.HostStrategy, cfg.HostMode, c.strategy, c.mode)
		}
		if c.hosts != nil && cfg.Addr() != strings.Join(c.hosts, ",")+"/"+cfg.MySQL.DBName {
			t.Errorf("%q: Addr() = %s", c.env, cfg.Addr())
		}
		if joined := strings.Join(cfg.Warnings, "\n"); !strings.Contains(joined, c.warn) {
			t.Errorf("%q: warnings lack %q:\n%s", c.env, c.warn, joined)
		}
		if strings.Contains(cfg.Addr(), "u:p") {
			t.Errorf("%q: Addr() %s shows credentials", c.env, cfg.Addr())
		}
	}
}

// A bad host list says which host is wrong and how to write one.
func TestParseConfigHostErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{"MYSQL_HOST", "h1,,h2"}, []string{"MYSQL_HOST=h1,,h2", "host 2", "is empty", "h1,h2:3307"}},
		{[]string{"MYSQL_HOST", "h1,h2:abc"}, []string{"host 2 (\"h2:abc\")", "port \"abc\"", "1 to 65535"}},
		{[]string{"MYSQL_HOST", "h1:70000"}, []string{"host 1", "port \"70000\""}},
		{[]string{"MYSQL_HOST", "h1,h1:3306"}, []string{"host 2", "listed twice"}},
		{[]string{"MYSQL_HOST", "[::1:3306"}, []string{"no closing ]"}},
		{[]string{"MYSQL_HOST", ":3306"}, []string{"no host name"}},
		{[]string{"MYSQL_HOST", "h1,h2", "MYSQL_HOST_STRATEGY", "random"}, []string{"MYSQL_HOST_STRATEGY=\"random\"", "sequential", "round-robin", "least-connections"}},
		{[]string{"MYSQL_HOST", "h1,h2", "MYSQL_GALERA", "yes please"}, []string{"MYSQL_GALERA", "true or false"}},
		{[]string{"MYSQL_JDBC_URL", "jdbc:mariadb:sequential://h1,,h2/zipkin"}, []string{"MYSQL_JDBC_URL", "host 2", "is empty"}},
		{[]string{"MYSQL_JDBC_URL", "jdbc:mysql://address=(host=h1)(port=3306),h2/zipkin"}, []string{"MYSQL_JDBC_URL", "host 1", "address=(host=…)(port=…)"}},
		{[]string{"MYSQL_JDBC_URL", "jdbc:mysql:loadbalance://h1:0,h2/zipkin"}, []string{"host 1", "port \"0\""}},
		{[]string{"MYSQL_JDBC_URL", "jdbc:mariadb:aurora://h1,h2/zipkin"}, []string{"unknown scheme jdbc:mariadb:aurora", "jdbc:mariadb:sequential"}},
	} {
		_, err := parseConfig(nil, envFunc(c.env...), io.Discard)
		if err == nil {
			t.Errorf("%q: no error", c.env)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", c.env, err, w)
			}
		}
	}
	// Several hosts need sqlpool's cluster connector: -pool=database-sql
	// says so at start-up (openStorage), not silently using one host.
	cfg, err := parseConfig([]string{"-pool", "database-sql"}, envFunc("MYSQL_HOST", "h1,h2"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = openStorage(t.Context(), cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "needs -pool=sqlpool") {
		t.Errorf("-pool=database-sql with two hosts: %v", err)
	}
}
