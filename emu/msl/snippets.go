package msl

import (
	"os"
	"regexp"
	"strconv"
	"strings"
)

// diagHeader is a compiler diagnostic's first line: file, line, column.
var diagHeader = regexp.MustCompile(`^(.+?):(\d+):(\d+): (?:fatal error|error|warning|note|remark): `)

// caretLine is the line under a diagnostic's source line that marks the
// column (^) and the ranges (~).
var caretLine = regexp.MustCompile(`^[ ~^]*\^[ ~^]*$`)

// originalSnippets puts the program's own line under each diagnostic in
// place of the translation's, where they differ (a rewritten vector
// constructor, cast or instantiation): source is the text of file, the
// program's other files are read from disk when files names them. The
// caret is moved to the same token in the original line, or left out when
// the token is not there; fix-it hints of the translated line are left out.
func originalSnippets(log, file, source string, files map[string]bool) string {
	texts := map[string][]string{}
	lineOf := func(name string, n int) (string, bool) {
		text, ok := texts[name]
		if !ok {
			switch {
			case name == file:
				text = strings.Split(source, "\n")
			case files[name]:
				if b, err := os.ReadFile(name); err == nil {
					text = strings.Split(string(b), "\n")
				}
			}
			texts[name] = text
		}
		if n < 1 || n > len(text) {
			return "", false
		}
		return strings.TrimSuffix(text[n-1], "\r"), true
	}
	lines := strings.Split(log, "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		m := diagHeader.FindStringSubmatch(lines[i])
		if m == nil || i+1 >= len(lines) {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		raw, ok := lineOf(m[1], n)
		orig, snippet := expandTabs(raw), lines[i+1]
		if !ok || snippet == orig || diagHeader.MatchString(snippet) {
			continue
		}
		header := len(out) - 1
		i++
		out = append(out, orig)
		if i+1 < len(lines) && caretLine.MatchString(lines[i+1]) {
			i++
			if col, ok := sameToken(snippet, strings.IndexByte(lines[i], '^'), orig); ok {
				out = append(out, strings.Repeat(" ", col)+"^")
				// the column of the token in the line as written
				at := m[1] + ":" + m[2] + ":"
				out[header] = at + strconv.Itoa(byteColumn(raw, col)+1) + out[header][len(at)+len(m[3]):]
			}
			// a fix-it hint for the translated line
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") && strings.TrimSpace(lines[i+1]) != "" && !caretLine.MatchString(lines[i+1]) {
				i++
			}
		}
	}
	return strings.Join(out, "\n")
}

// byteColumn is the byte offset in raw of display column col, tabs
// counting to the next stop of 8 columns.
func byteColumn(raw string, col int) int {
	c := 0
	for i := 0; i < len(raw); i++ {
		if c >= col {
			return i
		}
		if raw[i] == '\t' {
			c += 8 - c%8
		} else {
			c++
		}
	}
	return len(raw)
}

// sameToken finds, in orig, the token that starts at column col of
// snippet (the occurrence nearest col): its column.
func sameToken(snippet string, col int, orig string) (int, bool) {
	if col < 0 || col >= len(snippet) {
		return 0, false
	}
	end := col + 1
	if isIdentChar(snippet[col]) {
		for end < len(snippet) && isIdentChar(snippet[end]) {
			end++
		}
	}
	tok := snippet[col:end]
	best, found := 0, false
	for at := 0; ; at++ {
		k := strings.Index(orig[at:], tok)
		if k < 0 {
			break
		}
		at += k
		whole := !isIdentChar(tok[0]) || ((at == 0 || !isIdentChar(orig[at-1])) && (at+len(tok) == len(orig) || !isIdentChar(orig[at+len(tok)])))
		if whole && (!found || abs(at-col) < abs(best-col)) {
			best, found = at, true
		}
	}
	return best, found
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// expandTabs spaces a line's tabs to stops of 8 columns, as the compiler
// prints a source line.
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == '\t' {
			b.WriteString(strings.Repeat(" ", 8-b.Len()%8))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
