// Package cmdpattern is the language of a policy's command patterns: a
// pattern is words (quotes keep blanks inside one), each a wildcard over
// one argument (* any run of characters, ? one), ** any number of
// arguments; it matches a program whose argv starts with its words.
package cmdpattern

import (
	"fmt"
	"path"
	"strings"

	"github.com/wardenrt/warden/runtime/tool"
)

// Split splits a command pattern into words at blanks; single or
// double quotes keep blanks inside a word.
func Split(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("no words")
	}
	return words, nil
}

// Wildcard matches s against a glob where * is any run of characters
// (slashes included) and ? is one character.
func Wildcard(pat, s string) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pat) && pat[px] == '*':
			star, mark = px, sx
			px++
		case px < len(pat) && (pat[px] == '?' || pat[px] == s[sx]):
			px++
			sx++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(pat) && pat[px] == '*' {
		px++
	}
	return px == len(pat)
}

// Mode says what a word known only at run time may be when a command
// pattern is matched against it.
type Mode int

const (
	// One: any one word. At decision time the rule is assumed to apply,
	// and the tool checks the real argv again when the program starts.
	One Mode = iota
	// Any: any number of words, none included (an unquoted $x splits
	// into fields, or vanishes). For words no later check will see (an
	// inner script's variables, what xargs reads): a pattern that matches
	// some expansion of them.
	Any
	// None: no word a pattern can rely on; only ** covers it. A pattern
	// that matches this way matches whatever the word turns out to be.
	None
)

// Match reports whether argv starts with the words of pattern: each
// word a wildcard over one argument, ** any number of arguments. The
// program's name is compared by its base name (/usr/bin/git is git).
// Words known only at run time match as mode says. An opaque program
// matches every pattern. Linear in pattern × argv: the positions reachable
// after each pattern word.
func Match(pattern []string, p tool.Program, mode Mode) bool {
	if p.Opaque {
		return true
	}
	n := len(p.Argv)
	reach := make([]bool, n+1)
	reach[0] = true
	next := make([]bool, n+1)
	// skipDynamic lets a dynamic word expand to nothing (Any).
	skipDynamic := func(r []bool) {
		if mode != Any {
			return
		}
		for ai := 0; ai < n; ai++ {
			if r[ai] && p.IsDynamic(ai) {
				r[ai+1] = true
			}
		}
	}
	for _, w := range pattern {
		skipDynamic(reach)
		clear(next)
		any := false
		if w == "**" {
			for ai := 0; ai <= n; ai++ {
				if reach[ai] || (ai > 0 && next[ai-1]) {
					next[ai], any = true, true
				}
			}
		} else {
			for ai := 0; ai < n; ai++ {
				if !reach[ai] {
					continue
				}
				if p.IsDynamic(ai) {
					switch mode {
					case One:
						next[ai+1], any = true, true
					case Any: // this pattern word is one of its words: more may follow
						next[ai], next[ai+1], any = true, true, true
					}
					continue
				}
				arg := p.Argv[ai]
				if ai == 0 {
					arg = path.Base(arg)
				}
				if Wildcard(w, arg) {
					next[ai+1], any = true, true
				}
			}
		}
		if !any {
			return false
		}
		reach, next = next, reach
	}
	return true
}
