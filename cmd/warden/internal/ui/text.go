package ui

import "strings"

// ShellWord quotes s for a command line when it needs it.
func ShellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '@' || r == '+' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// OneLine is s printable on one line of at most n runes (… when cut).
func OneLine(s string, n int) string {
	s = Printable(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// OrDash is s, or - for an empty s (a table's empty cell).
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// OrEmpty is s, or an empty list for nil (JSON [] rather than null).
func OrEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Short16 is at most the first 16 bytes of s (a short sha256).
func Short16(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}
