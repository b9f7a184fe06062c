// Package typeenc reads Objective-C type encodings, the strings the
// runtime keeps for each method (method_getTypeEncoding): the result type,
// @ for the receiver, : for the selector, then each argument, as in
// "v@:{MTLSize=QQQ}^Q".
package typeenc

import "strings"

// Split splits a method's type encoding into its types: "v@:{MTLSize=QQQ}^Q"
// gives v, @, :, {MTLSize=QQQ} and ^Q. A qualifier such as r (const)
// stays with the type it qualifies.
func Split(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && strings.IndexByte("^rnNoORV", s[j]) >= 0 {
			j++
		}
		switch {
		case j < len(s) && s[j] == '{':
			depth := 0
			for ; j < len(s); j++ {
				if s[j] == '{' {
					depth++
				} else if s[j] == '}' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			j++
		case j+1 < len(s) && s[j] == '@' && s[j+1] == '?':
			j += 2
		default:
			j++
		}
		j = min(j, len(s))
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// A Kind is how the C calling convention treats a type.
type Kind uint8

// Kinds of types.
const (
	Unknown  Kind = iota // a type no send function passes
	Void                 // v
	Object               // @, #: an object or a class
	Word                 // an 8-byte integer or any pointer: Q q ^… * : @?
	Int32                // I i L l
	Int16                // S s
	Int8                 // C c B: also BOOL
	Double               // d
	Float                // f
	Struct16             // a struct of two 8-byte integers, such as NSRange
	Struct24             // a struct of three 8-byte integers, such as MTLSize
)

// Size returns the size in bytes of a value of the kind (0 for Void and
// Unknown).
func (k Kind) Size() int { return int(sizes[k]) }

var sizes = [...]uint8{
	Object: 8, Word: 8, Int32: 4, Int16: 2, Int8: 1, Double: 8, Float: 4, Struct16: 16, Struct24: 24,
}

var names = [...]string{"unknown", "void", "object", "word", "int32", "int16", "int8", "double", "float", "struct16", "struct24"}

func (k Kind) String() string { return names[k] }

// KindOf returns the kind of one type of an encoding.
func KindOf(t string) Kind {
	t = strings.TrimLeft(t, "rnNoORV")
	switch {
	case t == "":
		return Unknown
	case t == "@" || t == "#":
		return Object
	case t[0] == '^' || t == "*" || t == ":" || t == "@?":
		return Word
	case t[0] == '{':
		eq := strings.IndexByte(t, '=')
		if eq < 0 || !strings.HasSuffix(t, "}") {
			return Unknown
		}
		fields := t[eq+1 : len(t)-1]
		if fields == "" || strings.Trim(fields, "Qq") != "" {
			return Unknown
		}
		switch len(fields) {
		case 2:
			return Struct16
		case 3:
			return Struct24
		}
		return Unknown
	}
	if len(t) != 1 {
		return Unknown
	}
	switch t[0] {
	case 'v':
		return Void
	case 'Q', 'q':
		return Word
	case 'I', 'i', 'L', 'l':
		return Int32
	case 'S', 's':
		return Int16
	case 'C', 'c', 'B':
		return Int8
	case 'd':
		return Double
	case 'f':
		return Float
	}
	return Unknown
}
