package getopt

import (
	"os/exec"
	"testing"
)

// TestShellScript: where a shell's -c script is, read as the shell reads
// its words — -c is a flag, options go on after it, each o/O of a group
// takes the next word, -- and - end the options — and checked against the
// real shell where it is installed (it runs the word found as its
// script).
func TestShellScript(t *testing.T) {
	for _, tc := range []struct {
		words []string
		next  int
		st    Status
	}{
		{[]string{"sh", "-c", "echo MARK"}, 2, OK},
		{[]string{"sh", "-c", "--", "echo MARK"}, 3, OK},
		{[]string{"dash", "-c", "-", "echo MARK"}, 3, OK},
		{[]string{"dash", "-ce", "echo MARK", "-x"}, 2, OK},
		{[]string{"dash", "-co", "errexit", "echo MARK"}, 3, OK},
		{[]string{"bash", "-c", "-e", "echo MARK"}, 3, OK},
		{[]string{"bash", "-co", "pipefail", "echo MARK"}, 3, OK},
		{[]string{"bash", "-Oc", "extglob", "echo MARK"}, 3, OK},
		{[]string{"bash", "-ceO", "extglob", "echo MARK"}, 3, OK},
		{[]string{"bash", "-oO", "pipefail", "extglob", "-c", "echo MARK"}, 5, OK},
		{[]string{"bash", "-c", "+o", "pipefail", "echo MARK"}, 4, OK},
		{[]string{"bash", "--norc", "--noprofile", "-c", "echo MARK"}, 4, OK},
		{[]string{"bash", "-c", "--", "echo MARK", "--", "x"}, 3, OK},
		{[]string{"bash", "-e", "x.sh"}, 0, OK},
		{[]string{"bash", "x.sh", "-c", "y"}, 0, OK},
		{[]string{"bash", "-c", "--norc", "y"}, 2, Unknown}, // bash refuses a long option after the short ones
		{[]string{"bash", "--rcfile", "/dev/null", "-c", "echo MARK"}, 4, OK},
		{[]string{"bash", "--rcfile", "r", "-ic", "y"}, 4, Unknown}, // an interactive shell runs r first
		{[]string{"bash", "-cZ", "y"}, 1, Unknown},
		{[]string{"bash", "-c"}, 2, Unknown},
		{[]string{"bash", "-co"}, 2, Unknown},
		{[]string{"bash", "+c", "y"}, 1, Unknown},
		{[]string{"dash", "-O", "extglob", "-c", "y"}, 1, Unknown},
		{[]string{"zsh", "-c", "-b", "y"}, 3, OK},
		{[]string{"zsh", "--emulate", "sh", "-fc", "y"}, 4, OK},
	} {
		d := Shells[tc.words[0]]
		next, st := d.Script(tc.words, static)
		if next != tc.next || st != tc.st {
			t.Errorf("%q: %d %d, want %d %d", tc.words, next, st, tc.next, tc.st)
		}
		if tc.st != OK || tc.next == 0 {
			continue
		}
		if sh, err := exec.LookPath(tc.words[0]); err == nil {
			out, err := exec.Command(sh, tc.words[1:]...).Output()
			if err != nil || string(out) != "MARK\n" {
				t.Errorf("%q: the real %s printed %q (%v)", tc.words, tc.words[0], out, err)
			}
		}
	}
	// A word known only at run time where an option may stand.
	dyn := func(i int) bool { return i == 2 }
	if next, st := Shells["bash"].Script([]string{"bash", "-c", "$x", "y"}, dyn); next != 2 || st != Dynamic {
		t.Errorf("dynamic: %d %d", next, st)
	}
	if next, st := Shells["bash"].Script([]string{"bash", "-o", "$x", "-c", "y"}, dyn); next != 2 || st != Dynamic {
		t.Errorf("dynamic value: %d %d", next, st)
	}
}
