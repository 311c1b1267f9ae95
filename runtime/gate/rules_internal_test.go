package gate

import (
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"
)

// TestMatchArgv: prefixes, globs within a word, ** over any number of
// words, the program by its base name, words only known at run time, and
// a hostile pattern of many ** that a backtracking matcher would take
// hours over (this one is linear in pattern × argv).
func TestMatchArgv(t *testing.T) {
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
		words, err := splitWords(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := matchArgv(words, tt.p); got != tt.want {
			t.Errorf("%q ~ %v = %v, want %v", tt.pattern, tt.p, got, tt.want)
		}
	}
}
