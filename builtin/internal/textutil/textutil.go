// Package textutil holds the text helpers more than one tool family uses:
// showing untrusted text safely, clipping it, and the stop words left out
// of term counts.
package textutil

import (
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/wardenrt/warden/runtime/redact"
)

// Show makes untrusted text safe to print on a terminal: control and
// formatting characters (escape sequences, bidirectional overrides,
// zero-width characters) are shown escaped. Newlines are kept when
// multiline is set; tabs become spaces.
func Show(s string, multiline bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\n' && multiline:
			b.WriteByte('\n')
		case r == '\t':
			b.WriteByte(' ')
		case r == utf8.RuneError && len(s[i:]) > 0:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				fmt.Fprintf(&b, `\x%02x`, s[i])
				continue
			}
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// IsStopWord reports whether w is one of the common English function words
// left out of top_terms.
func IsStopWord(w string) bool { return stopWords()[w] }

// stopWords is built on first use: a process that never counts terms
// (`warden version`, most calls) does not pay for it.
var stopWords = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are aren't as at be because
	been before being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
	down during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's
	hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
	mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't she
	she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then there
	there's these they they'd they'll they're they've this those through to too under until up very was wasn't we we'd
	we'll we're we've were weren't what what's when when's where where's which while who who's whom why why's will with
	won't would wouldn't you you'd you'll you're you've your yours yourself yourselves also just may might must shall
	us via per etc e.g i.e yes one two get got like use used using`) {
		m[w] = true
	}
	return m
})

// Clip trims the space around s and keeps at most its first n bytes (never
// cutting a UTF-8 sequence, nor a secret: redact.Cut), followed by "…"
// when it cut.
func Clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return redact.Cut(s, n) + "…"
}
