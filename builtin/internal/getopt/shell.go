package getopt

import "strings"

// Shell is how a shell reads the words it is started with: bash's and
// dash's own reading, not getopt's. Long options (bash's --norc) come
// first; then groups of single letters after - or +, where c (after -
// only) is a flag saying the script is a word, and each letter of Value
// in a group takes the next word in turn (bash -Oo extglob pipefail);
// "--" and "-" end the options. The script of -c is the first word after
// the options; the words after it are $0, $1, ….
type Shell struct {
	Short string // letters that are flags
	Value string // letters that take the next word
	Long  string // long options, separated by spaces; NAME: takes the next word
	// Ends are the letters after which the shell reads no more options
	// (zsh's -b).
	Ends string
}

// Shells are the invocation tables of the shells warden reads, as their
// manuals give them: dash 0.5 (sh, ash and posh read the same letters),
// bash 5.2 (bash --help), mksh and ksh (their common letters), zsh 5.9
// (every letter is an option, and --NAME is one by its name).
var Shells = map[string]Shell{
	"sh":   posixShell,
	"dash": posixShell,
	"ash":  posixShell,
	"posh": posixShell,
	"bash": {Short: "abefhkmnptuvxBCEHPTilrsD", Value: "oO", Long: "debug debugger dump-po-strings dump-strings help " +
		"init-file: login noediting noprofile norc posix pretty-print rcfile: restricted verbose version wordexp"},
	"ksh":  kornShell,
	"mksh": kornShell,
	"zsh":  {Short: "0123456789abdefghiklmnpqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", Value: "o", Long: "*", Ends: "b"},
}

var (
	posixShell = Shell{Short: "aCefnuvxIimqVEbpls", Value: "o"}
	kornShell  = Shell{Short: "abCefhiklmnprsuvxX", Value: "oT"}
)

// longKind returns whether long option name is known and takes a value.
func (s Shell) longKind(name string) (known, value bool) {
	if s.Long == "*" {
		return name != "" && !strings.ContainsAny(name, "="), name == "emulate"
	}
	for _, f := range strings.Fields(s.Long) {
		if n, v := strings.CutSuffix(f, ":"); n == name {
			return true, v
		}
	}
	return false, false
}

// Script reads a shell's words from word 1 on as the shell does and
// returns where the script of -c is: its index, or 0 when there is no -c
// (the shell reads a file or its input). Unknown: an option the table
// does not hold, or a missing value; Dynamic: a word known only at run
// time where an option may stand (next is that word). An interactive
// shell (-i) with a startup file its words name (bash --rcfile F,
// --init-file F) runs that file first: that is Unknown too, as what it
// runs is not in the words.
func (s Shell) Script(words []string, dyn func(int) bool) (next int, st Status) {
	c, short, startup, interactive := false, false, false, false
	i := 1
options:
	for ; i < len(words); i++ {
		if dyn(i) {
			return i, Dynamic
		}
		a := words[i]
		switch {
		case a == "--" || a == "-":
			i++
			break options
		case strings.HasPrefix(a, "--"):
			known, value := s.longKind(a[2:])
			if !known || short {
				return i, Unknown
			}
			if value {
				if i++; i >= len(words) || dyn(i) {
					return valueStatus(words, dyn, i)
				}
				startup = startup || a == "--rcfile" || a == "--init-file"
			}
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			short = true
			end := false
			for k := 1; k < len(a); k++ {
				switch l := a[k]; {
				case l == 'c' && a[0] == '-':
					c = true
				case l == 'i' && a[0] == '-' && strings.IndexByte(s.Short, l) >= 0:
					interactive = true
				case strings.IndexByte(s.Value, l) >= 0:
					if i++; i >= len(words) || dyn(i) {
						return valueStatus(words, dyn, i)
					}
				case strings.IndexByte(s.Ends, l) >= 0:
					end = true
				case strings.IndexByte(s.Short, l) < 0:
					return i, Unknown
				}
			}
			if end {
				i++
				break options
			}
		default:
			break options
		}
	}
	switch {
	case startup && interactive:
		return i, Unknown
	case !c:
		return 0, OK
	case i >= len(words):
		return i, Unknown // -c without a script: the shell refuses
	}
	return i, OK
}

// valueStatus is how far a shell's words can be read when an option's
// value, word i, is missing or known only at run time.
func valueStatus(words []string, dyn func(int) bool, i int) (int, Status) {
	if i < len(words) && dyn(i) {
		return i, Dynamic
	}
	return i, Unknown
}
