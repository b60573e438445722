package replica

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Token carries what a sequence of calls — one request, one user — must see on a replica: the
// position of its own commits on the primary (read-your-writes) and of the newest state it has
// read (monotonic reads). A read through the reader with a Token waits, when the replica it
// goes to is behind the Token, until that replica has caught up, or goes to the primary.
//
// A Token is safe for concurrent use. Read-your-writes holds for every goroutine using it;
// monotonic reads hold for calls made one after another (concurrent reads are not ordered).
// Its zero value is not usable: create one with NewToken or ParseToken, or let the Router keep
// one per key (WithKey).
type Token struct {
	f  Flavor
	mu sync.Mutex
	// pos is what the next read must see.
	pos Position
	// pend is where the last read ran (a replica, or the primary) and endedAt when; until that
	// server's position is polled after endedAt, what the read saw is bounded only by that
	// server, so the next read sticks to it (or goes to the primary).
	pend    *node
	endedAt int64
}

// NewToken returns an empty Token for the Router's flavor: the first read goes anywhere.
func (r *Router) NewToken() *Token { return &Token{f: r.cfg.Flavor} }

// ParseToken reads a Token written by Token.String, e.g. from a cookie or a header set by
// another instance of the application. "" gives an empty Token.
func (r *Router) ParseToken(s string) (*Token, error) {
	t := r.NewToken()
	if s == "" {
		return t, nil
	}
	name, text, ok := strings.Cut(s, ":")
	if !ok || name != r.cfg.Flavor.Name() {
		return nil, fmt.Errorf("replica: token %q is not a %s token (%s:position[@server]); was it made by another router?", s, r.cfg.Flavor.Name(), r.cfg.Flavor.Name())
	}
	text, server, bounded := strings.Cut(text, "@")
	p, err := r.cfg.Flavor.Parse(text)
	if err != nil {
		return nil, err
	}
	t.pos = p
	if bounded {
		// The last read is bounded by that server until it is polled after now; an unknown
		// name (another deployment's replica) by the primary.
		t.pend, t.endedAt = r.primary, r.now()
		for _, n := range r.nodes {
			if n.name == server {
				t.pend = n
			}
		}
	}
	return t, nil
}

// String returns the Token as text for ParseToken: "flavor:position", e.g.
// "mariadb:0-1-4711", followed by "@server" (a replica's Name, or "primary") while the Token's
// last read is bounded only by the server it ran on (until that server's position is polled
// after the read, about PollInterval). A Router that parses it sends the next read to that
// server, or to the primary when it does not know the name, until then.
func (t *Token) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.f.Name() + ":" + posString(t.pos)
	if n := t.pend; n != nil {
		if st := n.state.Load(); st != nil && st.err == nil && st.polledAt > t.endedAt {
			t.pos = merge(t.pos, st.pos)
			t.pend = nil
			return t.f.Name() + ":" + posString(t.pos)
		}
		s += "@" + n.name
	}
	return s
}

// Position returns the position the Token's next read must see (nil: none).
func (t *Token) Position() Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pos
}

// committed records a commit at p (nil: the position is unknown, and reads go to the primary
// until its position is polled again).
func (t *Token) committed(p Position, primary *node, now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p == nil {
		t.pend, t.endedAt = primary, now
		return
	}
	t.pos = merge(t.pos, p)
}

// need returns the position the next read must see and the server it must stick to (nil:
// none), resolving the last read's bound once its server has been polled after it.
func (t *Token) need() (Position, *node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.pend; n != nil {
		if st := n.state.Load(); st != nil && st.err == nil && st.polledAt > t.endedAt {
			t.pos = merge(t.pos, st.pos)
			t.pend = nil
		}
	}
	return t.pos, t.pend
}

// readFrom records that a read began on n (nil: nowhere yet) having seen at least p.
func (t *Token) readAt(p Position) {
	t.mu.Lock()
	t.pos = merge(t.pos, p)
	t.mu.Unlock()
}

// readEnded records that a read on n ended at now.
func (t *Token) readEnded(n *node, now int64) {
	t.mu.Lock()
	t.pend, t.endedAt = n, now
	t.mu.Unlock()
}

type tokenKey struct{}
type keyKey struct{}

// WithToken returns a context whose reads through the reader and commits through the writer
// use t.
func WithToken(ctx context.Context, t *Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// TokenFrom returns the Token of ctx, or nil.
func TokenFrom(ctx context.Context) *Token {
	t, _ := ctx.Value(tokenKey{}).(*Token)
	return t
}

// WithKey returns a context whose reads and commits use the Router's Token for key (a user
// id, a session id): the Router keeps one Token per key, up to Config.MaxKeys. A Token set with
// WithToken wins over a key.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyKey{}, key)
}

// keyToken returns the Token of key, creating it. Past MaxKeys an arbitrary key is dropped
// and its position folded into the floor every new key starts from, so a dropped key's reads
// still see its writes (and possibly wait for others').
func (r *Router) keyToken(key string) *Token {
	r.keys.Lock()
	defer r.keys.Unlock()
	if t := r.keys.m[key]; t != nil {
		return t
	}
	if len(r.keys.m) >= r.cfg.MaxKeys {
		for k, old := range r.keys.m {
			old.mu.Lock()
			r.keys.floor = merge(r.keys.floor, old.pos)
			if old.pend != nil {
				if st := old.pend.state.Load(); st != nil {
					r.keys.floor = merge(r.keys.floor, st.pos)
				}
			}
			old.mu.Unlock()
			delete(r.keys.m, k)
			break
		}
	}
	t := &Token{f: r.cfg.Flavor, pos: r.keys.floor}
	r.keys.m[key] = t
	return t
}

// tokenFor returns the Token a call with ctx uses, or nil.
func (r *Router) tokenFor(ctx context.Context) *Token {
	if r.cfg.Mode == None {
		return nil
	}
	if t := TokenFrom(ctx); t != nil {
		return t
	}
	if k, ok := ctx.Value(keyKey{}).(string); ok {
		return r.keyToken(k)
	}
	return nil
}
