package mysqlstore

import (
	"context"
	"sort"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// GetKeys returns the configured autocomplete keys (Options.AutocompleteKeys),
// sorted and without repeats. They are not read from the database. With
// DisableSearch, or none configured, it returns nothing.
func (s *Store) GetKeys(ctx context.Context) ([]string, error) {
	if s.opts.DisableSearch || len(s.opts.AutocompleteKeys) == 0 {
		return nil, nil
	}
	keys := append([]string(nil), s.opts.AutocompleteKeys...)
	sort.Strings(keys)
	return sortedUnique(keys), nil
}

// GetValues returns the distinct values stored for tag key, sorted, when
// key is one of the configured autocomplete keys, and nothing otherwise (or
// with DisableSearch). There is no time bound, as in Zipkin. An empty key
// is a *model.QueryError "key was empty" (HTTP 400 in Zipkin).
func (s *Store) GetValues(ctx context.Context, key string) ([]string, error) {
	if key == "" {
		return nil, &model.QueryError{Msg: "key was empty"}
	}
	if s.opts.DisableSearch || !s.autocompleteKey(key) {
		return nil, nil
	}
	if values, ok, err := s.fastValues(ctx, key); ok {
		return values, err
	}
	return s.selectNames(ctx, stmtSelectAutocomplete, sqlAutocompleteValues, key)
}

func (s *Store) autocompleteKey(key string) bool {
	for _, k := range s.opts.AutocompleteKeys {
		if k == key {
			return true
		}
	}
	return false
}
