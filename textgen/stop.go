package textgen

import "strings"

// A stopper watches a stream of text for stop sequences. It gives out the
// text that can no longer be the start of one, holds back the tail that
// still may be, and at the first match gives out the text before it and
// reports the stop.
type stopper struct {
	stops []string
	held  string
	done  bool
}

func newStopper(stops []string) *stopper { return &stopper{stops: stops} }

// push adds text to the stream and returns what may be given out; stopped
// reports that a stop sequence matched (the text returned ends where it
// begins, and the stream is over). final says no more text follows: what
// was held back is given out.
func (s *stopper) push(text string, final bool) (out string, stopped bool) {
	if s.done {
		return "", true
	}
	if len(s.stops) == 0 {
		return text, false
	}
	s.held += text
	// The earliest match wins; text before held was given out because no
	// stop sequence could start in it.
	cut := -1
	for _, stop := range s.stops {
		if i := strings.Index(s.held, stop); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out, s.held, s.done = s.held[:cut], "", true
		return out, true
	}
	keep := 0
	if !final {
		keep = s.partial()
	}
	out = s.held[:len(s.held)-keep]
	s.held = s.held[len(s.held)-keep:]
	return out, false
}

// partial returns the length of the longest tail of held that is the
// start of a stop sequence.
func (s *stopper) partial() int {
	longest := 0
	for _, stop := range s.stops {
		for n := min(len(stop)-1, len(s.held)); n > longest; n-- {
			if strings.HasSuffix(s.held, stop[:n]) {
				longest = n
				break
			}
		}
	}
	return longest
}
