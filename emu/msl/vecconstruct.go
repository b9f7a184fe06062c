package msl

// vectorAliases collects the names that alias templates and typedefs give
// to vector types (template <typename T> using vec4 = metal::vec<T, 4>;
// typedef float4 F4;): declarations whose aliased type is a vector type
// or vec<...>.
func (tr *translator) vectorAliases() map[string]bool {
	t := tr.toks
	names := map[string]bool{}
	for i := 0; i+2 < len(t); i++ {
		if t[i].attr >= 0 {
			continue
		}
		switch t[i].text {
		case "using":
			n := tr.next(i + 1)
			if n >= len(t) || t[n].kind != tIdent {
				continue
			}
			eq := tr.next(n + 1)
			if eq >= len(t) || t[eq].text != "=" {
				continue
			}
			if end := tr.vectorTypeAt(tr.next(eq + 1)); end >= 0 && end < len(t) && t[end].text == ";" {
				names[t[n].text] = true
			}
		case "typedef":
			if end := tr.vectorTypeAt(tr.next(i + 1)); end >= 0 && end < len(t) && t[end].kind == tIdent {
				if semi := tr.next(end + 1); semi < len(t) && t[semi].text == ";" {
					names[t[end].text] = true
				}
			}
		}
	}
	return names
}

// vectorTypeAt returns the token after a vector type that starts at token
// j ([metal ::] float4, or [metal ::] vec<...>), or -1.
func (tr *translator) vectorTypeAt(j int) int {
	t := tr.toks
	if j < len(t) && t[j].text == "metal" {
		if c := tr.next(j + 1); c+1 < len(t) && t[c].text == ":" && t[c+1].text == ":" {
			j = tr.next(c + 2)
		}
	}
	if j >= len(t) {
		return -1
	}
	if vectorTypeName.MatchString(t[j].text) {
		return tr.next(j + 1)
	}
	if n := tr.next(j + 1); t[j].text == "vec" && n < len(t) && t[n].text == "<" {
		if gt := tr.match(n); gt > 0 {
			return tr.next(gt + 1)
		}
	}
	return -1
}

// rewriteVectorConstructs makes two MSL constructs on vector types C++
// reads otherwise: a constructor call with several values through an
// alias of a vector type, vec4<T>(a, b, c, d) or F4(x, y, z, w), or with
// one through vec<T, N> or an alias template, vec<float, 4>(h), becomes
// __pm_vmake<vec4<T>>(a, b, c, d), which converts the components; and static_cast<V>(x) to a vector
// type, which clang reinterprets or refuses, converts the components as
// MSL's does (__pm_vmake<V>(x)), also through a template parameter or
// typedef naming one (__pm_static_cast<T>(x)).
func (tr *translator) rewriteVectorConstructs() {
	t := tr.toks
	aliases := tr.vectorAliases()
	for i := 0; i+1 < len(t); i++ {
		if t[i].attr >= 0 || t[i].kind != tIdent {
			continue
		}
		if t[i].text == "static_cast" {
			lt, gt := tr.angleBrackets(i)
			if gt < 0 {
				continue
			}
			// the type: [metal ::] vector name, or an alias of one
			j := tr.next(lt + 1)
			if j < gt && t[j].text == "metal" {
				if c := tr.next(j + 1); c+1 < gt && t[c].text == ":" && t[c+1].text == ":" {
					j = tr.next(c + 2)
				}
			}
			if j < gt && tr.next(j+1) == gt && tr.typeNames[t[j].text] && !aliases[t[j].text] {
				// static_cast<T>(x) through a template parameter or
				// typedef T: a conversion of the components when T names
				// a vector type, else static_cast's own
				tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[i].end, text: "__pm_static_cast"})
				if open := tr.next(gt + 1); open < len(t) && t[open].text == "(" {
					tr.maskComparison(open, tr.match(open))
				}
				continue
			}
			if j >= gt || !(vectorTypeName.MatchString(t[j].text) && tr.next(j+1) == gt || aliases[t[j].text] || t[j].text == "vec") {
				continue
			}
			tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[i].end, text: "__pm_vmake"})
			continue
		}
		isVec := t[i].text == "vec" && tr.next(i+1) < len(t) && t[tr.next(i+1)].text == "<"
		if !aliases[t[i].text] && !isVec {
			continue
		}
		first := i
		if p := tr.prev(i); p >= 0 {
			switch t[p].text {
			case ":":
				q := tr.qualifier(i)
				if q < 0 || t[q].text != "metal" || tr.qualifier(q) >= 0 {
					continue
				}
				first = q
			case ".", "using", "typedef", "template":
				continue
			case ">":
				if tr.prev(p) >= 0 && t[tr.prev(p)].text == "-" {
					continue
				}
			}
		}
		last := i
		open := tr.next(i + 1)
		if open < len(t) && t[open].text == "<" {
			if last = tr.match(open); last < 0 {
				continue
			}
			open = tr.next(last + 1)
		}
		if open >= len(t) || t[open].text != "(" {
			continue
		}
		end := tr.match(open)
		if end < 0 {
			continue
		}
		commas, decl := 0, false
		for _, j := range tr.topLevel(open, end) {
			if t[j].text == "," {
				commas++
			}
			if n := tr.next(j + 1); n < end && t[j].kind == tIdent && t[n].kind == tIdent {
				decl = true // parameters: a declaration
			}
		}
		// several values, or one through template arguments (vec<T, 4>(x)
		// converts; F4(x) is the functional cast rewriteFunctionalCast
		// makes)
		if decl || tr.next(open+1) == end || commas == 0 && last == i || tr.replacedAt(t[i].start) {
			continue // (or rewriteFunctionalCast made it __pm_construct<F2>(a, b))
		}
		tr.repls = append(tr.repls, replacement{start: t[first].start, end: t[first].start, text: "__pm_vmake<"},
			replacement{start: t[last].end, end: t[last].end, text: ">"})
	}
}

// replacedAt reports whether a replacement starts at byte pos already.
func (tr *translator) replacedAt(pos int) bool {
	for _, r := range tr.repls {
		if r.start == pos {
			return true
		}
	}
	return false
}

// qualifier returns the name before a :: that precedes token i, or -1.
func (tr *translator) qualifier(i int) int {
	t := tr.toks
	p := tr.prev(i)
	if p < 1 || t[p].text != ":" || t[p-1].text != ":" || t[p-1].end != t[p].start {
		return -1
	}
	if q := tr.prev(p - 1); q >= 0 && t[q].kind == tIdent {
		return q
	}
	return -1
}
