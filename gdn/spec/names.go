package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// names are the names of an enumeration's values, in order from 0.
type names []string

// of returns the name of value v, or "typ(v)" for a value with none.
func (n names) of(v uint64, typ string) string {
	if v < uint64(len(n)) {
		return n[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// parse returns the value that s names, or an error naming what s was
// meant to be and the names it may be.
func (n names) parse(s, what string) (uint64, error) {
	for v, name := range n {
		if s == name {
			return uint64(v), nil
		}
	}
	quoted := make([]string, len(n))
	for i, name := range n {
		quoted[i] = strconv.Quote(name)
	}
	return 0, fmt.Errorf("spec: %s %q: want %s", what, s, strings.Join(quoted, " or "))
}
