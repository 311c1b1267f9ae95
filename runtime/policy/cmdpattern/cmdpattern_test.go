package cmdpattern

import (
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"
)

// TestMatch: prefixes, globs within a word, ** over any number of
// words, the program by its base name, words only known at run time, and
// a hostile pattern of many ** that a backtracking matcher would take
// hours over (this one is linear in pattern × argv).
func TestMatch(t *testing.T) {
	prog := func(words ...string) tool.Program { return tool.Program{Argv: words} }
	dyn := tool.Program{Argv: []string{"git", "$x"}, Dynamic: []bool{false, true}}
	tests := []struct {
		pattern string
		p       tool.Program
		want    bool
	}{
		{"git push", prog("git", "push", "origin"), true},
		{"git push", prog("git", "pull"), false},
		{"git push*", prog("/usr/bin/git", "push-all"), true},
		{"git ** push", prog("git", "-C", ".", "push"), true},
		{"git ** push", prog("git"), false},
		{"rm ** -*r*", prog("rm", "-f", "-r", "x"), true},
		{"rm ** -*r*", prog("rm", "x"), false},
		{"git push", dyn, true},
		{"ls", tool.Program{Argv: []string{"python3"}, Opaque: true}, true},
		{"echo" + strings.Repeat(" **", 20) + " zzz", prog(append([]string{"echo"}, strings.Fields(strings.Repeat("a ", 30))...)...), false},
	}
	for _, tt := range tests {
		words, err := Split(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := Match(words, tt.p, One); got != tt.want {
			t.Errorf("%q ~ %v = %v, want %v", tt.pattern, tt.p, got, tt.want)
		}
	}
}

// TestMatchUnseen: a word no later check sees (Any) may be any
// number of words, none included, so `git $x` may be `git push --force
// origin` or `git`; a pattern matches it for sure (None) only when **
// covers it.
func TestMatchUnseen(t *testing.T) {
	dyn := func(words ...string) tool.Program {
		p := tool.Program{Argv: words, Dynamic: make([]bool, len(words))}
		for i, w := range words {
			p.Dynamic[i] = strings.HasPrefix(w, "$")
		}
		return p
	}
	tests := []struct {
		pattern       string
		p             tool.Program
		possible, all bool
	}{
		{"git push --force*", dyn("git", "$x"), true, false},
		{"git push --force*", dyn("git", "$x", "origin"), true, false},
		{"git push", dyn("$g"), true, false},
		{"git *", dyn("git", "$x"), true, false},
		{"git **", dyn("git", "$x"), true, true},
		{"git ** --force", dyn("git", "$x", "--force"), true, true},
		{"git ** --force", dyn("git", "$x"), true, false},
		{"git status", dyn("git", "push", "$x"), false, false},
		{"rm ** -*r*", dyn("rm", "$a", "$b"), true, false},
		{"rm ** -*r*", dyn("rm", "-f", "x"), false, false},
		{"rm ** -*r*", dyn("rm", "$a", "-r"), true, true},
	}
	for _, tt := range tests {
		words, err := Split(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := Match(words, tt.p, Any); got != tt.possible {
			t.Errorf("%q ~ %v (any expansion) = %v, want %v", tt.pattern, tt.p, got, tt.possible)
		}
		if got := Match(words, tt.p, None); got != tt.all {
			t.Errorf("%q ~ %v (every expansion) = %v, want %v", tt.pattern, tt.p, got, tt.all)
		}
	}
}
