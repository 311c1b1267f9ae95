package memindex

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// Tokenizer limits.
const (
	MaxTermLen   = 64 // longer tokens are cut to their first 64 bytes
	MaxQueryTerm = 32 // distinct query terms used; the rest are ignored
)

// stopWords are dropped by the tokenizer (Lucene's English stop set).
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "but": true,
	"by": true, "for": true, "if": true, "in": true, "into": true, "is": true, "it": true, "no": true,
	"not": true, "of": true, "on": true, "or": true, "such": true, "that": true, "the": true,
	"their": true, "then": true, "there": true, "these": true, "they": true, "this": true, "to": true,
	"was": true, "will": true, "with": true,
}

// IsStopWord reports whether the tokenizer drops w.
func IsStopWord(w string) bool { return stopWords[w] }

// Tokenize calls fn with each term of text: maximal runs of Unicode letters
// and digits, lowercased, cut to MaxTermLen bytes, stop words dropped. The
// slice passed to fn is reused.
func Tokenize(text string, fn func(term []byte)) {
	var buf [MaxTermLen]byte
	n := 0
	full := false
	emit := func() {
		if n > 0 && !stopWords[string(buf[:n])] {
			fn(buf[:n])
		}
		n, full = 0, false
	}
	for _, r := range text {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			emit()
			continue
		}
		if full {
			continue
		}
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
		} else {
			r = unicode.ToLower(r)
		}
		if n+utf8.RuneLen(r) > MaxTermLen {
			full = true
			continue
		}
		n += utf8.EncodeRune(buf[n:], r)
	}
	emit()
}

// TermFreqs returns the distinct terms of text with their frequencies, and
// the number of terms.
func TermFreqs(text string) (map[string]uint32, uint32) {
	tf := make(map[string]uint32)
	var dl uint32
	Tokenize(text, func(t []byte) {
		tf[string(t)]++
		dl++
	})
	return tf, dl
}

// QueryTerms returns the distinct terms of a query's text, at most
// MaxQueryTerm of them, in order.
func QueryTerms(text string) []string {
	var terms []string
	Tokenize(text, func(t []byte) {
		if len(terms) < MaxQueryTerm && !slices.Contains(terms, string(t)) {
			terms = append(terms, string(t))
		}
	})
	return terms
}
