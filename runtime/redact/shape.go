package redact

// Most token rules' expressions are a literal prefix, one of a few, then a
// run of one class of bytes, at least so long (or exactly so long), and
// perhaps a word boundary: ^(?:AKIA|ASIA)[A-Z0-9]{16}\b. Such an
// expression is read by hand (tokenShape), without the regular expression
// machinery, whose backtracker clears its bitmap and allocates its result
// at each candidate — what configuration full of keys spent most of its
// time on. The expression stays beside the shape: it says how long a match
// is at least (minSecretLen), and the tests hold the shape to it
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
// newTokenShapes checks).
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

// newTokenShapes returns shapes, having checked what matchShapes relies
// on: a run of at least one byte, and, before a boundary, a class of word
// bytes only.
func newTokenShapes(shapes ...tokenShape) []tokenShape {
	for _, sh := range shapes {
		if sh.least < 1 || len(sh.prefixes) == 0 {
			panic("redact: a token shape without a prefix or a run")
		}
		if sh.boundary {
			for c := range sh.class {
				if sh.class[c] && !wordBytes[c] {
					panic("redact: a token shape's boundary after a class that is not all word bytes")
				}
			}
		}
	}
	return shapes
}

var (
	alnum       = newByteSet("a-z", "A-Z", "0-9")
	alnumUnder  = newByteSet("a-z", "A-Z", "0-9", "_")
	alnumDash   = newByteSet("a-z", "A-Z", "0-9", "_-")
	upperDigits = newByteSet("A-Z", "0-9")
)
