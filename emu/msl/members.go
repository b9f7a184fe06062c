package msl

import "strings"

// Member functions qualified by an address space (MLX writes
// `constexpr complex64_t() threadgroup`, `operator float() const device`)
// say where the object lives. Here device, constant and thread objects are
// in one address space, so such overloads would be one function defined
// several times, and clang cannot qualify a member function by the
// threadgroup address space. The translator keeps one member of each set of
// overloads that differ only in that qualifier (the thread or unqualified
// one, else device, constant, threadgroup), drops its qualifier, and blanks
// the others.

// Free functions overloaded by the address space of a parameter or of
// their result (MLX's complex.h defines operator+= for thread, threadgroup
// and device references) are alike: the thread and device overloads would
// be one function defined twice. Of functions at namespace scope whose
// declarations differ only in thread and device qualifiers, the translator
// keeps the first without device and blanks the others; threadgroup
// overloads are different functions here too, and stay, and so are
// constant ones unless constant (const here) makes them the same function
// as a device one (candle's copy of MLX's elem_to_loc for device const
// and constant const pointers).

// spaceRank orders the qualifiers by which overload is kept.
var spaceRank = map[string]int{"": 0, "thread": 0, "device": 1, "constant": 2, "threadgroup": 3}

// member is a member function declaration of a class body.
type member struct {
	first, last int    // tokens of the whole declaration
	qual        int    // token of the address-space qualifier, or -1
	key         string // the declaration up to its parameter list, and const
}

// scopeFrame is a brace-delimited scope of memberQualifiers.
type scopeFrame struct {
	class   bool
	members []member
	start   int // first token of the current member declaration

	namespace bool     // the file scope or a namespace body
	decl      int      // first token of the declaration this scope's brace opens
	funcs     []member // function definitions of a namespace scope
}

func (tr *translator) memberQualifiers() {
	t := tr.toks
	stack := []scopeFrame{{namespace: true}}
	stmt := 0 // first token of the current statement
	for i := 0; i < len(t); i++ {
		if t[i].attr >= 0 {
			continue
		}
		top := &stack[len(stack)-1]
		switch t[i].text {
		case "{":
			stack = append(stack, scopeFrame{class: tr.isClassHead(stmt, i), start: i + 1,
				namespace: top.namespace && tr.isNamespaceHead(stmt, i), decl: stmt})
			stmt = i + 1
		case "}":
			stmt = i + 1
			if len(stack) == 1 {
				continue
			}
			closed := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if closed.class {
				tr.resolveMembers(closed.members)
			}
			if closed.namespace {
				tr.resolveFunctions(closed.funcs)
			}
			parent := &stack[len(stack)-1]
			if parent.namespace && !closed.class && !closed.namespace {
				if f, ok := tr.function(closed.decl, i); ok {
					parent.funcs = append(parent.funcs, f)
				}
			}
			if !parent.class {
				continue
			}
			// a member function body ends its declaration; a nested type
			// or a braced initializer goes on to its ';'
			if n := tr.next(i + 1); closed.class || n < len(t) && t[n].text == ";" {
				continue
			}
			tr.addMember(parent, i)
		case ";":
			if top.class {
				tr.addMember(top, i)
			}
			stmt = i + 1
		case ":":
			if p := tr.prev(i); p >= 0 && (t[p].text == "public" || t[p].text == "private" || t[p].text == "protected") {
				top.start = i + 1
				stmt = i + 1
			}
		}
	}
	tr.resolveFunctions(stack[0].funcs)
}

// isNamespaceHead reports whether the tokens from first to the brace at
// open begin a namespace body (or an extern "C" block).
func (tr *translator) isNamespaceHead(first, open int) bool {
	for k := first; k < open; k++ {
		if tr.toks[k].attr < 0 && (tr.toks[k].text == "namespace" || tr.toks[k].text == "extern") {
			return true
		}
	}
	return false
}

// function returns the function definition from token first to the brace
// at last that closes its body, keyed by its declaration without thread
// and device qualifiers.
func (tr *translator) function(first, last int) (member, bool) {
	t := tr.toks
	k0 := tr.next(first)
	if k0 < last && t[k0].text == "template" {
		if n := tr.next(k0 + 1); n < last && t[n].text == "<" {
			if m := tr.match(n); m > 0 && m < last {
				k0 = m + 1
			}
		}
	}
	open := -1
	operator := false // the = of operator= and operator+= is no initializer
	for k := k0; k < last; k++ {
		if t[k].attr >= 0 {
			continue
		}
		if t[k].text == "(" && !(operator && tr.prev(k) >= 0 && t[tr.prev(k)].text == "operator") {
			open = k
			break
		}
		operator = operator || t[k].text == "operator"
		if t[k].text == "=" && !operator || t[k].text == "{" || t[k].text == "struct" || t[k].text == "class" || t[k].text == "union" || t[k].text == "enum" {
			return member{}, false
		}
	}
	if open < 0 {
		return member{}, false
	}
	closeIdx := tr.match(open)
	if closeIdx < 0 || closeIdx > last {
		return member{}, false
	}
	f := member{first: first, last: last, qual: -1}
	var key []string
	for k := first; k <= closeIdx; k++ {
		if t[k].attr >= 0 {
			continue
		}
		switch t[k].text {
		case "device":
			f.qual = k
			continue
		case "thread":
			continue
		case "constant":
			// constant is const here: constant const T* is device const T*
			f.qual = k
			if n := len(key); n == 0 || key[n-1] != "const" {
				key = append(key, "const")
			}
			continue
		case "const":
			if n := len(key); n > 0 && key[n-1] == "const" {
				continue
			}
		}
		key = append(key, t[k].text)
	}
	f.key = strings.Join(key, " ")
	return f, true
}

// resolveFunctions keeps the first of each set of function definitions
// that differ only in thread and device qualifiers, preferring one without
// device, and blanks the others.
func (tr *translator) resolveFunctions(funcs []member) {
	groups := map[string][]member{}
	var keys []string
	for _, f := range funcs {
		if groups[f.key] == nil {
			keys = append(keys, f.key)
		}
		groups[f.key] = append(groups[f.key], f)
	}
	for _, k := range keys {
		g := groups[k]
		if len(g) < 2 {
			continue
		}
		keep := 0
		for i, f := range g {
			if f.qual < 0 {
				keep = i
				break
			}
		}
		for i, f := range g {
			if i == keep || f.qual < 0 {
				continue // a true redefinition: left for the compiler to report
			}
			tr.blank(tr.toks[f.first].start, tr.toks[f.last].end)
		}
	}
}

// isClassHead reports whether the tokens from first to the brace at open
// begin a struct, class or union body.
func (tr *translator) isClassHead(first, open int) bool {
	for k := first; k < open; k++ {
		if tr.toks[k].attr >= 0 {
			continue
		}
		switch tr.toks[k].text {
		case "struct", "class", "union":
			return true
		case "(", "=", "enum":
			return false
		}
	}
	return false
}

// addMember records the declaration of f's class body that ends at token
// last, if it is a member function.
func (tr *translator) addMember(f *scopeFrame, last int) {
	t := tr.toks
	first := f.start
	f.start = last + 1
	open := -1
	k0 := tr.next(first)
	if k0 < last && t[k0].text == "template" {
		// template <...> header: its default arguments are not initializers
		if n := tr.next(k0 + 1); n < last && t[n].text == "<" {
			if m := tr.match(n); m > 0 && m < last {
				k0 = m + 1
			}
		}
	}
	for k := k0; k < last; k++ {
		if t[k].attr < 0 && t[k].text == "(" {
			open = k
			break
		}
		if t[k].attr < 0 && (t[k].text == "=" || t[k].text == "{") {
			return
		}
	}
	if open < 0 {
		return
	}
	closeIdx := tr.match(open)
	if closeIdx < 0 || closeIdx > last {
		return
	}
	m := member{first: first, last: last, qual: -1}
	isConst := false
	for k := tr.next(closeIdx + 1); k < last; k = tr.next(k + 1) {
		s := t[k].text
		if _, ok := spaceRank[s]; ok && s != "" {
			m.qual = k
			continue
		}
		if s == "const" {
			isConst = true
			continue
		}
		if s == "volatile" || s == "noexcept" {
			continue
		}
		break
	}
	m.key = tr.memberKey(first, open, closeIdx)
	if isConst {
		m.key += " const"
	}
	f.members = append(f.members, m)
}

// memberKey is the declaration of a member function from token first to
// the parenthesis at close that ends its parameter list, without the
// address space of its result (thread T& operator[](size_t) thread and
// device T& operator[](size_t) device, as SPIRV-Cross's spvUnsafeArray
// declares them, are one set of overloads; constant const is const).
func (tr *translator) memberKey(first, open, close int) string {
	t := tr.toks
	var key []string
	for k := first; k <= close; k++ {
		s := t[k].text
		if k < open && t[k].attr < 0 {
			if _, ok := spaceRank[s]; ok {
				if s == "constant" {
					s = "const"
				} else {
					continue
				}
			}
			if n := len(key); s == "const" && n > 0 && key[n-1] == "const" {
				continue
			}
		}
		key = append(key, s)
	}
	return strings.Join(key, " ")
}

func (tr *translator) space(m member) string {
	if m.qual < 0 {
		return ""
	}
	return tr.toks[m.qual].text
}

// resolveMembers keeps one of each set of overloads that differ only in
// their address-space qualifier.
func (tr *translator) resolveMembers(members []member) {
	groups := map[string][]member{}
	var keys []string
	for _, m := range members {
		k := strings.Join(strings.Fields(m.key), " ")
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], m)
	}
	for _, k := range keys {
		g := groups[k]
		keep := 0
		for i, m := range g {
			if spaceRank[tr.space(m)] < spaceRank[tr.space(g[keep])] {
				keep = i
			}
		}
		for i, m := range g {
			if i == keep {
				if m.qual >= 0 {
					q := tr.toks[m.qual]
					tr.repls = append(tr.repls, replacement{start: q.start, end: q.end, text: ""})
				}
				continue
			}
			if m.qual < 0 || spaceRank[tr.space(m)] == spaceRank[tr.space(g[keep])] {
				continue // a true redefinition: left for the compiler to report
			}
			tr.blank(tr.toks[m.first].start, tr.toks[m.last].end)
		}
	}
}
