package ui

import (
	"fmt"
	"strings"
)

// Printable makes text that warden did not write itself (a wasm tool's
// description or preview, a guest's panic line in an error message, a
// file name) safe to print on a terminal: control characters other than
// newline and tab — ESC above all, which starts the sequences that move
// the cursor, rewrite what is on screen or set the window title — and the
// C1 controls (U+0080–U+009F; U+009B is a one-character CSI in some
// terminals) and the bidirectional controls (U+202E shows what follows
// reversed) are shown escaped (\x1b, \u009b) instead of being sent.
// Invalid UTF-8 is shown as U+FFFD. JSON output needs none of this:
// encoding/json escapes every control character.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) || r == '\uFFFD' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) ||
		r == '\u2028' || r == '\u2029' || // line separators some terminals honour
		r == '\u200e' || r == '\u200f' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') // bidi controls, which reorder what is shown
}
