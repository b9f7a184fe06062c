package objc

import "sync"

// A SelectorTable names the selectors a package sends and where each is
// kept once registered: a binding declares one table, registers it on
// first use, and lists its names for checking against Apple's headers.
type SelectorTable struct {
	once    sync.Once
	entries []SelectorEntry
}

// A SelectorEntry is one selector of a SelectorTable: its name, and the
// variable that holds it once registered.
type SelectorEntry struct {
	Name string
	Dst  *SEL
}

// NewSelectorTable returns a table of the given selectors.
func NewSelectorTable(entries ...SelectorEntry) *SelectorTable {
	return &SelectorTable{entries: entries}
}

// Register registers every selector of the table, the first time it is
// called, and stores each in its variable.
func (t *SelectorTable) Register() {
	t.once.Do(func() {
		for _, e := range t.entries {
			*e.Dst = RegisterName(e.Name)
		}
	})
}

// Names returns the name of every selector in the table.
func (t *SelectorTable) Names() []string {
	names := make([]string, len(t.entries))
	for i, e := range t.entries {
		names[i] = e.Name
	}
	return names
}
