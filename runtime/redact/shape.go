package redact

// Most token rules' expressions are a prefix, one of a few, a run of one
// class of bytes at least (or exactly) so long, and perhaps a word
// boundary: ^(?:AKIA|ASIA)[A-Z0-9]{16}\b. They are read by hand
// (tokenShape), without the backtracker's set-up and allocation at each
// candidate, what configuration full of keys spent most of its time on.
// The expression stays beside its shapes, which the tests hold to it
// (checkShapes, on generated text and in FuzzScan).

// tokenShape is one alternative of a token rule's expression: one of
// prefixes, then a run of bytes of class at least least long — exactly
// least long with exact — then, with boundary, no word byte (RE2's \b,
// the run's last byte being a word byte).
type tokenShape struct {
	prefixes []string
	class    *byteSet
	least    int
	exact    bool
	boundary bool
}

// matchShapes returns the end of what the expression whose alternatives
// are shapes matches at the start of s (s[:end]), or -1. The alternatives
// are tried in order, as RE2 tries them (leftmost-first); within one, a
// run is read greedily, and there is no other reading that could match
// where that one does not: the run is all the shape's choice, and a
// boundary cannot fall between two of a class's bytes (each a word byte,
// TestTokenShapes checks).
func matchShapes(shapes []tokenShape, s string) int {
	for i := range shapes {
		sh := &shapes[i]
		for _, p := range sh.prefixes {
			if len(s) < len(p) || s[:len(p)] != p {
				continue
			}
			start := len(p)
			var end int
			if sh.exact {
				if len(s)-start < sh.least || runEnd(s[:start+sh.least], start, sh.class) < start+sh.least {
					continue
				}
				end = start + sh.least
			} else {
				end = runEnd(s, start, sh.class)
				if end-start < sh.least {
					continue
				}
			}
			if sh.boundary && end < len(s) && wordBytes[s[end]] {
				continue
			}
			return end
		}
	}
	return -1
}

var alnum, upperDigits = newByteSet("a-z", "A-Z", "0-9"), newByteSet("A-Z", "0-9")
