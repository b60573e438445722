package txstate

// set parses the rest of a SET statement into in. Recognised: assignments
// of user variables, autocommit, the transaction variables and the variables
// of RestoredVariables in session (or next-transaction) scope, NAMES and
// CHARACTER SET items, and SET [SESSION|LOCAL] TRANSACTION. SET STATEMENT
// ... FOR stmt (MariaDB) takes the class of stmt. Anything else is
// ClassSetOther: a session variable whose value at connect is unknown.
func (l *lexer) set(in *info, depth int) {
	in.class = ClassSetOther
	l.skip() // so that restoring l.i never undoes an executable-comment closer
	save := l.i
	switch w := l.word(); {
	case eqFold(w, "transaction"):
		l.setTransaction(in)
		return
	case eqFold(w, "session"), eqFold(w, "local"):
		if l.is("transaction") {
			l.setTransaction(in)
			return
		}
	case eqFold(w, "statement"):
		if c := l.peek(); c != '=' && c != ':' {
			l.setStatement(in, depth)
			return
		}
	}
	l.i = save

	class := ClassSetUserVar
	for {
		if more, ok := l.setCharset(in); ok {
			if class == ClassSetUserVar {
				class = ClassSetVariable
			}
			if !more {
				break
			}
			continue
		}
		target, user, ok := l.setTarget()
		if !ok {
			return
		}
		switch c := l.peek(); {
		case c == '=':
			l.i++
		case c == ':' && l.i+1 < len(l.s) && l.s[l.i+1] == '=':
			l.i += 2
		default:
			return
		}
		value, more := l.expr()
		switch {
		case user:
			in.userVar = true
		case eqFold(target, "autocommit"):
			in.ac = boolValue(value)
			class = ClassSetAutocommit
		case eqFold(target, "transaction_isolation"), eqFold(target, "tx_isolation"):
			in.iso = true
			if class != ClassSetAutocommit {
				class = ClassSetTransaction
			}
		case eqFold(target, "transaction_read_only"), eqFold(target, "tx_read_only"):
			in.iso = true
			in.ro = boolValue(value)
			if class != ClassSetAutocommit {
				class = ClassSetTransaction
			}
		default:
			v, known := lookupVar(target)
			if !known {
				return
			}
			lit := literal(value)
			if value == "" {
				in.userVar = true // an expression: it may read a table
			}
			in.assign(v, lit)
			switch v {
			case vCharsetConnection:
				in.assign(vCollationConnection, "") // the character set's default
			case vCollationConnection:
				in.assign(vCharsetConnection, "") // the collation's character set
			}
			if class == ClassSetUserVar {
				class = ClassSetVariable
			}
		}
		if !more {
			break
		}
	}
	if !l.atEnd() {
		return
	}
	in.class = class
}

// assign records that variable v was set to value ("" when unknown).
func (in *info) assign(v sysVar, value string) {
	in.vars |= 1 << v
	in.vals[v] = value
}

// setCharset parses a NAMES or CHARACTER SET (CHARSET) item of a SET:
// NAMES cs [COLLATE coll] sets character_set_client, _results and
// _connection to cs and collation_connection to coll (or cs's default, which
// is not known here); CHARACTER SET cs sets character_set_client and
// _results to cs and the connection's character set and collation to the
// database's. ok is false, with nothing consumed, when the item is neither;
// more says a ',' (another item) follows.
func (l *lexer) setCharset(in *info) (more, ok bool) {
	l.skip() // so that restoring l.i never undoes an executable-comment closer
	save := l.i
	w := l.word()
	names := eqFold(w, "names")
	switch {
	case names, eqFold(w, "charset"):
	case eqFold(w, "character") && l.is("set"):
	default:
		l.i = save
		return false, false
	}
	if c := l.peek(); c == '=' || c == ':' || c == ',' || c == 0 || c == ';' {
		l.i = save
		return false, false
	}
	cs := literal(l.token())
	coll := ""
	if names && l.is("collate") {
		coll = literal(l.token())
	}
	in.assign(vCharsetClient, cs)
	in.assign(vCharsetResults, cs)
	in.names, in.nColl = true, ""
	if names {
		in.nColl = coll
		in.assign(vCharsetConnection, cs)
		in.assign(vCollationConnection, coll)
	} else {
		in.assign(vCharsetConnection, "")
		in.assign(vCollationConnection, "")
	}
	switch c := l.peek(); {
	case c == ',':
		l.i++
		return true, true
	case c == 0 || c == ';':
		return false, true
	}
	// Something else follows: leave it for the caller, which finds no
	// assignment there and classes the statement ClassSetOther.
	return false, true
}

// setTarget consumes an assignment's optional SESSION or LOCAL scope and its
// variable: @user, @'user', @@name, @@session.name, @@local.name or name.
// It returns the system variable's name (or "" for a user variable),
// whether it is a user variable, and false for anything it cannot accept:
// GLOBAL or PERSIST scope, a component variable (x.y), a quoted name.
func (l *lexer) setTarget() (name string, user, ok bool) {
	l.skip() // so that restoring l.i never undoes an executable-comment closer
	save := l.i
	switch w := l.word(); {
	case eqFold(w, "session"), eqFold(w, "local"):
	case w == "":
	default:
		l.i = save
	}
	l.skip()
	s := l.s
	if l.i < len(s) && s[l.i] == '@' {
		l.i++
		if l.i < len(s) && s[l.i] == '@' {
			l.i++
			start := l.i
			for l.i < len(s) && isWord(s[l.i]) {
				l.i++
			}
			name = s[start:l.i]
			if l.i < len(s) && s[l.i] == '.' {
				if !eqFold(name, "session") && !eqFold(name, "local") {
					return "", false, false
				}
				l.i++
				start = l.i
				for l.i < len(s) && isWord(s[l.i]) {
					l.i++
				}
				name = s[start:l.i]
			}
		} else {
			// A user variable: a quoted name or letters, digits, '.', '_', '$'.
			if l.i < len(s) && (s[l.i] == '\'' || s[l.i] == '"' || s[l.i] == '`') {
				bs := s[l.i] != '`' && (s[l.i] == '\'' && l.bsSingle || s[l.i] == '"' && l.bsDouble)
				l.i = skipQuoted(s, l.i, bs)
				return "", true, true
			}
			start := l.i
			for l.i < len(s) && (isWord(s[l.i]) || s[l.i] == '.') {
				l.i++
			}
			return "", true, l.i > start
		}
	} else {
		start := l.i
		for l.i < len(s) && isWord(s[l.i]) {
			l.i++
		}
		name = s[start:l.i]
	}
	if name == "" || l.i < len(s) && s[l.i] == '.' {
		return "", false, false
	}
	return name, false, true
}

// expr consumes an expression up to a ',' outside parentheses or the end of
// the statement. It returns the expression's text if it is a single token,
// else "", and whether a ',' (another assignment) follows.
func (l *lexer) expr() (single string, more bool) {
	depth, n := 0, 0
	for {
		c := l.peek()
		switch {
		case c == 0:
			return single, false
		case c == ';' && depth == 0:
			return single, false
		case c == ',' && depth == 0:
			l.i++
			return single, true
		case c == '(':
			depth++
		case c == ')':
			depth--
		}
		t := l.token()
		n++
		if n == 1 {
			single = t
		} else {
			single = ""
		}
	}
}

// boolValue reads a boolean system variable's value: 1, ON, TRUE, 0, OFF,
// FALSE, optionally quoted. Anything else (DEFAULT, an expression, a
// variable) is unknown.
func boolValue(v string) tri {
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	switch {
	case v == "1", eqFold(v, "on"), eqFold(v, "true"):
		return triOn
	case v == "0", eqFold(v, "off"), eqFold(v, "false"):
		return triOff
	}
	return triUnknown
}

// setTransaction parses the characteristics of SET [SESSION] TRANSACTION:
// ISOLATION LEVEL ..., READ ONLY, READ WRITE. Without SESSION the setting is
// for the next transaction only, which a borrower may leave unused: it is
// reset all the same.
func (l *lexer) setTransaction(in *info) {
	in.class = ClassSetTransaction
	in.iso = true
	for !l.atEnd() {
		w := l.token()
		if eqFold(w, "read") {
			switch {
			case l.is("only"):
				in.ro = triOn
			case l.is("write"):
				in.ro = triOff
			}
		}
	}
}

// setStatement parses MariaDB's SET STATEMENT assignments FOR statement:
// the assignments last for that one statement, which gives the class. An
// autocommit assignment (which MariaDB rejects here) is ClassSetOther: a
// statement run with autocommit off could leave a transaction open.
func (l *lexer) setStatement(in *info, depth int) {
	if depth > 0 {
		return
	}
	paren := 0
	for {
		c := l.peek()
		switch {
		case c == 0, c == ';':
			return
		case c == '(':
			paren++
		case c == ')':
			paren--
		}
		t := l.token()
		if eqFold(t, "autocommit") {
			return
		}
		if paren == 0 && eqFold(t, "for") {
			break
		}
	}
	*in = info{}
	l.statement(in, depth+1)
}
