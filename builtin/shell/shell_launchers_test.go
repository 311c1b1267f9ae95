package shell

import (
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"
)

// TestLauncherSubjects: what command rules see of each launcher's words,
// read with its own option table — the command it runs, or an opaque
// subject where warden cannot tell (an unknown or ambiguous option, a
// word known only at run time where an option may stand, sudo -s).
func TestLauncherSubjects(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"timeout 5 rm -rf x", "rm -rf x"},
		{"timeout -k 1 -s KILL 5 rm -rf x", "rm -rf x"},
		{"timeout --kill=1 --sig KILL --fore 5 rm -rf x", "rm -rf x"},
		{"timeout --v 5 rm -rf x", "opaque"}, // --verbose or --version
		{"timeout -x 5 rm -rf x", "opaque"},
		{"nice -n 5 rm -rf x", "rm -rf x"},
		{"nice -5 rm -rf x", "rm -rf x"},
		{"nice --adjustment=5 rm -rf x", "rm -rf x"},
		{"nohup rm -rf x", "rm -rf x"},
		{"nohup -- rm -rf x", "rm -rf x"},
		{"setsid -f rm -rf x", "rm -rf x"},
		{"setsid --fork --wait rm -rf x", "rm -rf x"},
		{"stdbuf -o0 -eL rm -rf x", "rm -rf x"},
		{"stdbuf -i 0 rm -rf x", "rm -rf x"},
		{"/usr/bin/time -f %e -o out rm -rf x", "rm -rf x"},
		{"/usr/bin/time --format=%e rm -rf x", "rm -rf x"},
		{"ionice -c 3 -n7 rm -rf x", "rm -rf x"},
		{"ionice --cl 3 rm -rf x", "opaque"}, // --class or --classdata
		{"taskset -c 0 rm -rf x", "rm -rf x"},
		{"taskset 0x1 rm -rf x", "rm -rf x"},
		{"flock -w 5 lk rm -rf x", "rm -rf x"},
		{"flock --nb lk rm -rf x", "rm -rf x"},
		{"flock --n lk rm -rf x", "opaque"}, // --nonblocking or --no-fork
		{"flock lk -c 'rm -rf x'", "rm -rf x"},
		{"flock -c 'rm -rf x' lk", "opaque"},
		{"chronic -ev rm -rf x", "rm -rf x"},
		{"unbuffer -p rm -rf x", "rm -rf x"},
		{"sudo -u root -g wheel rm -rf x", "rm -rf x"},
		{"sudo -E --user=root FOO=1 rm -rf x", "rm -rf x"},
		{"sudo -s rm -rf x", "opaque"},
		{"sudo -i rm -rf x", "opaque"},
		{"sudo --sh rm -rf x", "opaque"}, // --shell
		{"doas -u root rm -rf x", "rm -rf x"},
		{"doas -s", "opaque"},
		{"env -u A -C / FOO=1 rm -rf x", "rm -rf x"},
		{"env -S '-v -u A rm -rf x'", "rm -rf x"},
		{"env -vS'rm -rf' x", "rm -rf x"},
		{"env -S '-S \"rm -rf\" x'", "rm -rf x"},
		{"env --ign=X rm -rf x", "opaque"}, // --ignore-environment or --ignore-signal
		{"env -S 'rm \"x'", "opaque"},      // env refuses the string
		{"xargs -0 -n 1 rm -rf", "rm -rf ‹input›"},
		{"xargs -I X rm -rf X", "rm -rf ‹input›"},
		{"xargs -i rm -rf {}", "rm -rf ‹input›"},
		{"xargs --replace=@ rm -rf a@", "rm -rf a‹input›"},
		{"xargs -I X X -rf", "opaque"},
		{"xargs", "echo ‹input›"},
		{"busybox rm -rf x", "rm -rf x"},
		{"busybox timeout 5 rm -rf x", "opaque"},
		{"bash -c -e 'rm -rf x'", "rm -rf x"},
		{"sh -c -- 'rm -rf x'", "rm -rf x"},
		{"bash -Oc extglob 'rm -rf x'", "opaque"}, // -O changes how the script is read
		{"bash -c -Z 'rm -rf x'", "opaque"},
		{"zsh -c 'rm -rf x'", "opaque"}, // zsh's language is not bash's
		{"fish -c 'rm -rf x'", "opaque"},
	} {
		p := tool.Program{Argv: splitTest(t, tc.cmd)}
		p.Dynamic = make([]bool, len(p.Argv))
		subs := subjects(p)
		got := "none"
		if len(subs) > 1 {
			got = strings.Join(subs[len(subs)-1].Argv, " ")
			if subs[len(subs)-1].Opaque {
				got = "opaque"
			}
		}
		if got != tc.want {
			t.Errorf("%s: the last subject is %q, want %q (%v)", tc.cmd, got, tc.want, subs)
		}
	}
}

// splitTest splits a command into its words as the shell would.
func splitTest(t *testing.T, cmd string) []string {
	t.Helper()
	ps := scriptPrograms(cmd, "bash")
	if len(ps) == 0 || ps[0].Opaque {
		t.Fatalf("%s: %v", cmd, ps)
	}
	return ps[0].Argv
}
