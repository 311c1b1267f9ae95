package ui

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode ✓":                 "plain text, ünïcode ✓",
		"two\nlines\tand a tab":                 "two\nlines\tand a tab",
		"\x1b[2J\x1b]0;owned\x07Approve? [y/N]": `\x1b[2J\x1b]0;owned\x07Approve? [y/N]`,
		"carriage\rreturn":                      `carriage\x0dreturn`,
		"c1 \u009b31m csi":                      `c1 \u009b31m csi`,
		"del\x7f":                               `del\x7f`,
		"bad utf8 \xff":                         "bad utf8 \uFFFD",
		"rm -rf \u202e/ fo\u2066x":              `rm -rf \u202e/ fo\u2066x`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
