package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The queue, the spool and the sampler, as the protocol code might reach
// them: a selector with one of these names in a protocol file is the
// sequence of Transport.Ingest replayed outside it.
var ingestInternals = []string{
	"q", "spool", "sampler", "posts", "receiving",
	"offer", "offerWait", "offerDurable", "filter", "full", "reserve",
	"receiveBody", "gunzip", "acquire", "Append",
	"messages", "messagesDropped", "messagesRejected", "bytes", "spans", "spansDropped", "messageSpans", "messageBytes",
}

// TestOneIngestEntryPoint checks, by parsing the sources, that every ingest
// protocol goes through Transport.Ingest: no protocol file (POST
// /api/v2/spans in collect.go; every package under ../collector: OTLP/HTTP,
// gRPC, Kafka, RabbitMQ) touches the queue, the spool, the sampler or the
// metrics itself; the queue's offers and the spool's appends happen only in
// Ingest (and in the spool's replay at start); and each protocol calls
// Ingest.
func TestOneIngestEntryPoint(t *testing.T) {
	fset := token.NewFileSet()
	parse := func(path string) *ast.File {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	// The protocol files: collect.go and every non-test file under
	// ../collector.
	protocols := []string{"collect.go"}
	err := filepath.WalkDir("../collector", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") && !strings.Contains(path, "internal") {
			protocols = append(protocols, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	callsIngest := map[string]bool{}
	for _, path := range protocols {
		f := parse(path)
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasSuffix(p, "/zipkin/spool") {
				t.Errorf("%s imports the spool: a protocol reaches the spool only through Transport.Ingest", path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := sel.Sel.Name
			if name == "Ingest" {
				callsIngest[filepath.Dir(path)+"/"+filepath.Base(path)] = true
			}
			if slices.Contains(ingestInternals, name) && !allowedSelector(sel) {
				t.Errorf("%s: %s uses .%s: only Transport.Ingest reaches the queue, the spool, the sampler and the metrics",
					path, fset.Position(sel.Pos()), name)
			}
			return true
		})
	}
	for _, want := range []string{
		"./collect.go",                                // POST /api/v2/spans, /api/v1/spans
		"../collector/collector.go",                   // Kafka and RabbitMQ (collector.Handler)
		"../collector/otlphttp/otlphttp.go",           // OTLP/HTTP
		"../collector/grpccollector/grpccollector.go", // OTLP/gRPC and Zipkin gRPC
	} {
		if !callsIngest[want] {
			t.Errorf("%s does not call Transport.Ingest", want)
		}
	}
	for _, broker := range []string{"../collector/kafka", "../collector/rabbitmq"} {
		found := false
		for _, p := range protocols {
			if strings.HasPrefix(p, broker) {
				found = true
			}
		}
		if !found {
			t.Errorf("no source files found in %s", broker)
		}
	}

	// In this package, the queue's offers and the spool's appends happen
	// only in Transport.Ingest and Server.replay.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"Transport.Ingest", "Server.replay"}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f := parse(path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := funcName(fn)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "offerDurable", "offerWait", "Append":
				default:
					return true
				}
				if sel.Sel.Name == "Append" && !isSpool(sel.X) {
					return true
				}
				// offer and offerWait call offerDurable: the queue's own.
				if !slices.Contains(allowed, name) && !strings.HasPrefix(name, "ingestQueue.") {
					t.Errorf("%s: %s calls %s: only Transport.Ingest (and the replay at start) queue spans", path, name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// allowedSelector excepts package-qualified identifiers (server.Accepted,
// codec.Proto3, ...), which share no name with the internals but could.
func allowedSelector(sel *ast.SelectorExpr) bool {
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Obj == nil && id.Name != "s" && id.Name != "t"
}

// isSpool reports whether x names a spool (s.spool, t.s.spool, sp).
func isSpool(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name == "sp"
	case *ast.SelectorExpr:
		return x.Sel.Name == "spool"
	}
	return false
}

// funcName is Recv.Name for a method, Name for a function.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
