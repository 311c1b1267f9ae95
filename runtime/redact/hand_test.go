package redact

import (
	"math/rand"
	"strings"
	"testing"
)

// lastWordSlow is lastWord as first written, with strings.LastIndexAny.
func lastWordSlow(key string) string {
	if i := strings.LastIndexAny(key, "._-"); i >= 0 {
		key = key[i+1:]
	}
	for i := len(key) - 1; i > 0; i-- {
		if key[i] >= 'A' && key[i] <= 'Z' && key[i-1] >= 'a' && key[i-1] <= 'z' {
			return key[i:]
		}
	}
	return key
}

// openBracketsSlow counts the brackets open before keyStart on its line
// reading the line from its start.
func openBracketsSlow(s string, keyStart int) int {
	lineStart := strings.LastIndexByte(s[:keyStart], '\n') + 1
	depth := 0
	for i := lineStart; i < keyStart; i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	i := keyStart
	for i > lineStart && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	if i == lineStart || strings.IndexByte("([{,", s[i-1]) < 0 {
		return 0
	}
	return depth
}

// TestHandReads: lastWord is what LastIndexAny gave; a lineScan read on
// from key to key (and back) counts the brackets a read from each key's
// line start counts; the name and space bytes' tables are the
// comparisons they replace, and hasAny is ContainsAny.
func TestHandReads(t *testing.T) {
	for c := range 256 {
		b := byte(c)
		start := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_' || b == '$'
		if isIdentStart(b) != start || isIdentByte(b) != (start || b >= '0' && b <= '9') {
			t.Fatalf("byte %q: isIdentStart %v, isIdentByte %v", b, isIdentStart(b), isIdentByte(b))
		}
		if space := b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v'; isSpace(b) != space {
			t.Fatalf("byte %q: isSpace %v", b, isSpace(b))
		}
	}
	rng := rand.New(rand.NewSource(5))
	brackets := []string{"(", ")", "[", "]", "{", "}", ",", " ", "\t", "\n", "a", "é", "\xff"}
	for range 5000 {
		s := genScanText(rng)
		if got, want := lastWord(s), lastWordSlow(s); got != want {
			t.Fatalf("lastWord(%q) = %q, want %q", s, got, want)
		}
		if hasAny(s, formatStart) != strings.ContainsAny(s, "%{$#<") || hasAny(s, digitsDollar) != strings.ContainsAny(s, "0123456789$") {
			t.Fatalf("hasAny(%q) is not ContainsAny", s)
		}
		var b strings.Builder
		for range rng.Intn(40) {
			b.WriteString(brackets[rng.Intn(len(brackets))])
		}
		s = b.String()
		ls := &lineScan{s: s}
		for k := 0; k <= len(s); k++ {
			at := k
			if rng.Intn(8) == 0 {
				at = rng.Intn(len(s) + 1) // back, and on again
			}
			if got, want := ls.openBrackets(at), openBracketsSlow(s, at); got != want {
				t.Fatalf("%q: %d brackets open at %d, want %d", s, got, at, want)
			}
		}
	}
}

// TestAnchorWords: an anchor read as a word is the anchor compared byte by
// byte, at every position of text made of anchors in any case, cut short
// and glued to bytes that fold to a letter's case and to those that do not.
func TestAnchorWords(t *testing.T) {
	rng := rand.New(rand.NewSource(17))
	sc := rulesScanner()
	glue := []string{"", "@", "`", "[", "{", "K", "k", "\x4b", "\xcb", "\xeb", "_", " "}
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.Intn(4) {
			a := sc.anchors[rng.Intn(len(sc.anchors))].text
			for k := range len(a) {
				c := a[k]
				if rng.Intn(2) == 0 && 'a' <= c && c <= 'z' {
					c -= 'a' - 'A'
				}
				if rng.Intn(20) == 0 {
					c ^= 0x20 // a byte that folds into the letter's place, or not
				}
				b.WriteByte(c)
			}
			b.WriteString(glue[rng.Intn(len(glue))])
		}
		s := b.String()
		s = s[:rng.Intn(len(s)+1)]
		for i := range len(s) {
			for k := range sc.anchors {
				a := &sc.anchors[k]
				want := len(s)-i >= len(a.text) && hasAnchor(s[i:i+len(a.text)], a.text, a.fold)
				if got := a.at(s, i); got != want {
					t.Fatalf("anchor %q at %d of %q: %v, byte by byte %v", a.text, i, s, got, want)
				}
			}
		}
	}
}
