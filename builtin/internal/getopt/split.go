package getopt

import (
	"errors"
	"strings"
)

// SplitEnvString splits the string of GNU env's -S (--split-string) into
// the words env reads in its place, as coreutils 9.1 does: blanks
// separate words outside quotes; '…' and "…" quote (a backslash in '…'
// escapes only \ and '); \_ is a separator outside "…" and a space inside;
// \c ends the string, as does # at the start of a word; \" \# \$ \' \\ \f
// \n \r \t \v are escapes; ${NAME} is replaced by env's own environment,
// so a word holding one is known only at run time (expanded[i]; the word
// keeps the ${NAME} text). An error is what makes env refuse the string.
func SplitEnvString(s string) (words []string, expanded []bool, err error) {
	var b strings.Builder
	sep, sq, dq, exp := true, false, false, false
	var out []string
	var outExp []bool
	open := false // a word has been started
	begin := func() {
		if sep {
			if open {
				out, outExp = append(out, b.String()), append(outExp, exp)
			}
			b.Reset()
			exp, sep, open = false, false, true
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' && !dq, c == '"' && !sq:
			if c == '\'' {
				sq = !sq
			} else {
				dq = !dq
			}
			begin()
			continue
		case strings.IndexByte(" \t\n\v\f\r", c) >= 0 && !sq && !dq:
			sep = true
			continue
		case c == '#' && sep:
			return finish(out, outExp, &b, exp, open, sq, dq, true)
		case c == '\\' && (!sq || i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '\'')):
			i++
			if i >= len(s) {
				return nil, nil, errors.New("a backslash at the end of the string")
			}
			switch n := s[i]; n {
			case '"', '#', '$', '\'', '\\':
				c = n
			case '_':
				if !dq {
					sep = true
					continue
				}
				c = ' '
			case 'c':
				if dq {
					return nil, nil, errors.New(`\c in a double-quoted string`)
				}
				return finish(out, outExp, &b, exp, open, sq, dq, true)
			case 'f', 'n', 'r', 't', 'v':
				c = "\f\n\r\t\v"[strings.IndexByte("fnrtv", n)]
			default:
				return nil, nil, errors.New(`an unknown escape \` + string(n))
			}
		case c == '$' && !sq:
			end := varEnd(s, i)
			if end < 0 {
				return nil, nil, errors.New("only ${NAME} is expanded")
			}
			begin()
			b.WriteString(s[i : end+1])
			exp = true
			i = end
			continue
		}
		begin()
		b.WriteByte(c)
	}
	return finish(out, outExp, &b, exp, open, sq, dq, false)
}

// finish closes the last word; an open quote is an error unless the
// string ended early (# or \c).
func finish(out []string, outExp []bool, b *strings.Builder, exp, open, sq, dq, early bool) ([]string, []bool, error) {
	if !early && (sq || dq) {
		return nil, nil, errors.New("an unterminated quote")
	}
	if open {
		out, outExp = append(out, b.String()), append(outExp, exp)
	}
	return out, outExp, nil
}

// varEnd returns the index of the } of a ${NAME} at s[i] ('$'), or -1.
func varEnd(s string, i int) int {
	j := i + 2
	if j >= len(s) || s[i+1] != '{' || !(s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z') {
		return -1
	}
	for j++; j < len(s); j++ {
		switch c := s[j]; {
		case c == '}':
			return j
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		default:
			return -1
		}
	}
	return -1
}
