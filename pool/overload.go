package pool

import "errors"

// ErrOverloaded is what an acquire the pool sheds under overload matches (errors.Is).
var ErrOverloaded = errors.New("sqlpool: overloaded")
