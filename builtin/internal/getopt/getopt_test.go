package getopt

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var timeout = Table{Short: "k:s:v", Long: "kill-after=k: signal=s: verbose=v foreground preserve-status help version"}

func static(int) bool { return false }

// TestParse: clusters, attached and separate values, long options by
// prefix, and what the table does not hold.
func TestParse(t *testing.T) {
	xargs := Table{Short: "0a:E:e::i::I:l::L:n:oprs:txP:d:", Long: "null=0 arg-file=a: delimiter=d: eof=e:: replace=I:: max-lines=l:: max-args=n: open-tty=o interactive=p no-run-if-empty=r max-chars=s: verbose=t show-limits exit=x max-procs=P: process-slot-var: version help"}
	nice := Table{Short: "n:", Long: "adjustment=n: help version", Numeric: true}
	for _, tc := range []struct {
		t     Table
		words string
		keys  string // key=value of each option
		next  int
		st    Status
	}{
		{timeout, "timeout 5 rm", "", 1, OK},
		{timeout, "timeout -s KILL 5 rm", "s=KILL", 3, OK},
		{timeout, "timeout -sKILL -v 5 rm", "s=KILL v", 3, OK},
		{timeout, "timeout --sig KILL 5 rm", "s=KILL", 3, OK},
		{timeout, "timeout --sig=KILL 5 rm", "s=KILL", 2, OK},
		{timeout, "timeout --fore --pre 5 rm", "foreground preserve-status", 3, OK},
		{timeout, "timeout --v 5 rm", "", 1, Unknown}, // verbose, version
		{timeout, "timeout --verbose=1 5 rm", "", 1, Unknown},
		{timeout, "timeout -x 5 rm", "", 1, Unknown},
		{timeout, "timeout -s", "", 1, Unknown},
		{timeout, "timeout -- 5 rm", "", 2, OK},
		{timeout, "timeout - 5", "", 1, OK},
		{nice, "nice --adj 5 rm", "n=5", 3, OK},
		{nice, "nice -5 rm", "n=5", 2, OK},
		{nice, "nice --5 rm", "n=5", 2, OK},
		{nice, "nice -+5 rm", "n=+5", 2, OK},
		{xargs, "xargs -i rm -rf {}", "i", 2, OK},
		{xargs, "xargs -iX rm", "i=X", 2, OK},
		{xargs, "xargs -I X rm", "I=X", 3, OK},
		{xargs, "xargs -0I{} rm", "0 I={}", 2, OK},
		{xargs, "xargs --max-lines 1 rm", "l", 2, OK},
		{xargs, "xargs --ma 1 rm", "", 1, Unknown},
		{xargs, "xargs --e=x rm", "", 1, Unknown}, // eof, exit
		{xargs, "xargs --rep=Q rm", "I=Q", 2, OK},
		{xargs, "xargs --process-slot-var=V rm", "process-slot-var=V", 2, OK},
	} {
		w := strings.Fields(tc.words)
		opts, next, st := tc.t.Parse(w, static, 1, "")
		var keys []string
		for _, o := range opts {
			k := o.Key
			if o.HasValue {
				k += "=" + o.Value
			}
			keys = append(keys, k)
		}
		if strings.Join(keys, " ") != tc.keys || next != tc.next || st != tc.st {
			t.Errorf("%q: %q next %d status %d, want %q %d %d", tc.words, keys, next, st, tc.keys, tc.next, tc.st)
		}
	}
	// A word known only at run time stops the reading; a value known only
	// then is marked.
	dyn := func(i int) bool { return i == 2 }
	if opts, next, st := timeout.Parse([]string{"timeout", "-s", "$s", "5", "rm"}, dyn, 1, ""); st != OK || next != 3 || !opts[0].Dynamic {
		t.Errorf("dynamic value: %+v %d %d", opts, next, st)
	}
	if _, next, st := timeout.Parse([]string{"timeout", "-v", "$o", "5", "rm"}, dyn, 1, ""); st != Dynamic || next != 2 {
		t.Errorf("dynamic option: %d %d", next, st)
	}
	env := Table{Short: "C:iS:u:v0", Long: "split-string=S: unset=u:"}
	if opts, next, st := env.Parse([]string{"env", "-vS", "-i x", "y"}, static, 1, "S"); st != OK || next != 3 || len(opts) != 2 {
		t.Errorf("stop: %+v %d %d", opts, next, st)
	}
}

// TestSplitEnvString: GNU env's -S splitting, compared with the real env
// where it is installed (its --debug prints the words).
func TestSplitEnvString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		exp  []bool
	}{
		{"git status", []string{"git", "status"}, nil},
		{"  -i  git", []string{"-i", "git"}, nil},
		{`a'b c'd "e f" ''`, []string{"ab cd", "e f", ""}, nil},
		{`a\_b "c\_d" #e f`, []string{"a", "b", "c d"}, nil},
		{`a\cb c`, []string{"a"}, nil},
		{`x#y 'a\'b' 'c\d'`, []string{"x#y", "a'b", `c\d`}, nil},
		{`${X} -rf a${Y}b '${Z}'`, []string{"${X}", "-rf", "a${Y}b", "${Z}"}, []bool{true, false, true, false}},
		{`"a\tb"`, []string{"a\tb"}, nil},
	} {
		got, exp, err := SplitEnvString(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q %v, want %q", tc.in, got, err, tc.want)
		}
		if tc.exp != nil && !slices.Equal(exp, tc.exp) {
			t.Errorf("%q: expanded %v, want %v", tc.in, exp, tc.exp)
		}
		// The real env splits it the same way (printf shows each word).
		if env, err := exec.LookPath("env"); err == nil && !strings.Contains(tc.in, "$") {
			out, err := exec.Command(env, "-S", `printf <%s>\n `+tc.in).Output()
			var words []string
			for _, l := range strings.SplitAfter(string(out), ">\n") {
				if l != "" {
					words = append(words, strings.TrimSuffix(strings.TrimPrefix(l, "<"), ">\n"))
				}
			}
			if err != nil || !slices.Equal(words, tc.want) {
				t.Errorf("%q: the real env -S reads %q (%v)", tc.in, words, err)
			}
		}
	}
	for _, bad := range []string{`a\`, `'a`, `"a`, `$X`, `${1}`, `\q`, `"\c"`} {
		if _, _, err := SplitEnvString(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
