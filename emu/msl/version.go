package msl

import (
	"regexp"
	"strings"
)

// bfloatTypeName matches the bfloat types of MSL 3.1.
var bfloatTypeName = regexp.MustCompile(`^bfloat[234]?$`)

// checkLanguageVersion refuses what the language version does not have,
// as Apple's compiler does: below MSL 3.1 there is no bfloat type, so a
// program naming bfloat, bfloat2, bfloat3 or bfloat4 (which it does not
// declare itself) gets Apple's diagnostic at its use. version is an
// MTLLanguageVersion; zero means 3.1.
func (tr *translator) checkLanguageVersion(version uint32) {
	if version == 0 || version >= 3<<16|1 {
		return
	}
	t := tr.toks
	own := map[string]bool{}
	for i := range t {
		if t[i].attr >= 0 || t[i].kind != tIdent || !bfloatTypeName.MatchString(t[i].text) {
			continue
		}
		if p := tr.prev(i); p >= 0 && (t[p].text == "struct" || t[p].text == "class" || t[p].text == "using" || t[p].text == "union" || t[p].text == "enum") {
			own[t[i].text] = true
		}
		if n := tr.next(i + 1); n < len(t) && t[n].text == ";" && tr.declarationHas(i, "typedef") {
			own[t[i].text] = true
		}
	}
	for i := range t {
		if t[i].attr >= 0 || t[i].kind != tIdent || !bfloatTypeName.MatchString(t[i].text) || own[t[i].text] || tr.isMember(i) {
			continue
		}
		tr.errorf(t[i].line, t[i].col, "unknown type name '%s'", t[i].text)
	}
}

// declarationHas reports whether the declaration holding token i names
// keyword before it (typedef ushort bfloat;, kernel void f, [[kernel]]
// void f): a token back to the end of the statement or scope before.
func (tr *translator) declarationHas(i int, keyword string) bool {
	t := tr.toks
	for j := i - 1; j >= 0; j-- {
		switch t[j].text {
		case keyword:
			return true
		case ";", "{", "}":
			return false
		}
	}
	return false
}

// checkSimdgroupShapes refuses a simdgroup_matrix (or
// make_filled_simdgroup_matrix) whose literal shape is not 8x8, the only
// one here, at the program's own line.
func (tr *translator) checkSimdgroupShapes() {
	t := tr.toks
	for i := range t {
		if t[i].attr >= 0 || t[i].kind != tIdent || (t[i].text != "simdgroup_matrix" && t[i].text != "make_filled_simdgroup_matrix") || tr.isMember(i) {
			continue
		}
		lt, gt := tr.angleBrackets(i)
		if gt < 0 {
			continue
		}
		var args []string
		depth, arg := 0, ""
		for j := lt + 1; j < gt; j++ {
			switch t[j].text {
			case "(", "[", "<":
				depth++
			case ")", "]", ">":
				depth--
			}
			if t[j].text == "," && depth == 0 {
				args, arg = append(args, arg), ""
				continue
			}
			arg += t[j].text
		}
		args = append(args, arg)
		if len(args) != 3 {
			continue
		}
		for _, a := range args[1:] {
			if n := strings.TrimRight(a, "uU"); isDecimal(n) && n != "8" {
				tr.errorf(tr.toks[i].line, tr.toks[i].col, "simdgroup_matrix other than 8x8 is not supported by the emulated device (simdgroup_matrix<%s, %s, %s>)", args[0], args[1], args[2])
				break
			}
		}
	}
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
