package shell

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// planSeeds are commands as the tests, the policy examples and agents
// write them: pipes, substitutions, launchers, shells, eval, redirections.
var planSeeds = []string{
	"sort < in.txt | tr a-z A-Z",
	`echo "n=$(cat in.txt | sort | cat)"`,
	"sort in.txt > out/s.txt 2>&1; cat out/s.txt",
	"cd sub && cat x.txt && cd .. && ls sub",
	`f() { echo "in f: $1"; }; f arg`,
	`x=cat; eval "$x sub/x.txt"`,
	"cat sub/x.txt & wait",
	"tr a-z A-Z <<< abc",
	"git status; python3 x.py",
	"timeout 5 sh -c 'git status; python3 x.py'",
	`env -S"git push" x`,
	`env --split-string="rm -rf x"`,
	`flock lk -c "rm -rf x"`,
	`sh +o errexit -c "git push"`,
	`bash --rcfile /dev/null -c "rm -rf x"`,
	"echo -rf victim | xargs rm",
	"nice -n 5 nohup curl x",
	"g=git; $g push",
	"sudo -u root env FOO=1 timeout -s KILL 5 stdbuf -o0 git -C . push",
	`eval 'eval "touch MARK"'`,
	"find . -exec touch MARK \\;",
	"sed -i s/a/b/ .git/config x.txt",
	"echo x > .git/hooks/pre-commit",
	"export LD_PRELOAD=/tmp/x.so; PATH=/tmp ls",
	"command -v git; exec git status; . ./x.sh",
	"cat <(ls) >| out.txt 3<> rw.txt",
	"for f in a b; do git push; done; while true; do break; done",
	"busybox sh -c 'taskset 1 ionice -c3 make'",
}

// FuzzPlan: the shell tool's static analysis of a command (analyze, and
// subjects/launched for the policy's command rules) never panics and is
// deterministic; every program it reports is well formed, and every
// opaque subject names the program that starts it (an earlier program
// with its words); the exec needs are exactly the plan's; fs needs are
// clean absolute paths, and a write into .git/ or .warden/ is always
// refused; and the programs of a command are among those of
// `sh -c 'command'` (the two paths through the analysis agree).
func FuzzPlan(f *testing.F) {
	for _, s := range planSeeds {
		f.Add(s)
	}
	ws, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []string{".git/hooks", "sub", "out"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	grants := capability.NewSet(ws, mustGrant(f, "exec:*"), mustGrant(f, "env:FOO"))
	run := func(command string) (*analysis, bool) {
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
		if err != nil {
			return nil, false
		}
		return analyze(analyzeInput{file: file, ws: ws, cwd: ws, grants: grants, path: defaultPath}), true
	}
	f.Fuzz(func(t *testing.T, command string) {
		if len(command) > 4<<10 || strings.ContainsRune(command, 0) {
			return
		}
		a, ok := run(command)
		if !ok {
			return
		}
		b, _ := run(command)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("two analyses of %q differ:\n%+v\n%+v", command, a, b)
		}
		checkPrograms(t, command, a.programs)

		// The plan renders, and says what the analysis found.
		if _, err := json.Marshal(a.plan); err != nil {
			t.Fatalf("plan of %q: %v", command, err)
		}
		_ = a.plan.text()
		var planNeeds []string
		for _, c := range a.plan.Commands {
			if c.Kind == "dynamic" && !a.unseen {
				t.Fatalf("%q: a command named only at run time (%v) but not unseen", command, c.Argv)
			}
			if c.Need != "" {
				planNeeds = append(planNeeds, c.Need)
			}
		}
		var execNeeds []string
		for _, n := range a.needs {
			switch n.Kind {
			case capability.Exec:
				execNeeds = append(execNeeds, n.String())
			case capability.FSRead, capability.FSWrite:
				if !capability.CleanPath(n.Resource) {
					t.Fatalf("%q: need %s is not a clean absolute path", command, n)
				}
				if n.Kind == capability.FSWrite && protected(ws, n.Resource) && a.refusal == nil {
					t.Fatalf("%q writes %s, inside .git/ or .warden/, and is not refused", command, n.Resource)
				}
			default:
				t.Fatalf("%q: unexpected need %s", command, n)
			}
		}
		slices.Sort(planNeeds)
		if !slices.Equal(slices.Compact(planNeeds), slices.Sorted(slices.Values(execNeeds))) {
			t.Fatalf("%q: exec needs %v, the plan's %v", command, execNeeds, planNeeds)
		}
		if e := a.refusal; e != nil && e.Code != tool.CodeInvalidInput && e.Code != tool.CodeCapabilityDenied {
			t.Fatalf("%q: refusal with code %s", command, e.Code)
		}

		// Seen through sh -c, the command starts at least the same programs
		// — unless it starts with - or +, which the shell reads as its own
		// options (sh -c +0 is not the script +0): that invocation is
		// opaque, which the rules judge more strictly.
		if len(command) > 1<<10 || strings.HasPrefix(command, "-") || strings.HasPrefix(command, "+") {
			return
		}
		wrapped, ok := run("sh -c " + quote(command))
		if !ok {
			t.Fatalf("sh -c %s does not parse", quote(command))
		}
		if slices.ContainsFunc(wrapped.programs, func(q tool.Program) bool { return q.Opaque && len(q.Argv) > 1 && q.Argv[0] == "sh" }) {
			return // beyond a plain inner script (plainScript): opaque, which every rule matches
		}
		for _, p := range a.programs {
			if p.Opaque {
				continue
			}
			if !slices.ContainsFunc(wrapped.programs, func(q tool.Program) bool {
				return !q.Opaque && slices.Equal(p.Argv, q.Argv) && slices.Equal(p.Dynamic, q.Dynamic)
			}) {
				t.Fatalf("%q starts %s, which sh -c %s does not report (%v)", command, p, quote(command), wrapped.programs)
			}
		}
	})
}

// checkPrograms checks the subjects command rules see: a program has
// words, one Dynamic flag per word and no launcher; an opaque subject
// names an earlier program that starts it — with the same words, or
// one whose words hold the script it runs (sh -c SCRIPT, env -S, flock -c).
func checkPrograms(t *testing.T, command string, progs []tool.Program) {
	t.Helper()
	for j, p := range progs {
		if !p.Opaque {
			if len(p.Argv) == 0 || len(p.Dynamic) != len(p.Argv) || p.Launcher != 0 {
				t.Fatalf("%q: program %d is malformed: %#v", command, j, p)
			}
			continue
		}
		l := p.Launcher - 1
		if l < 0 || l >= j || progs[l].Opaque {
			t.Fatalf("%q: opaque subject %d (%s) names launcher %d of %v", command, j, p, p.Launcher, progs)
		}
		launcher := progs[l]
		if slices.Equal(p.Argv, launcher.Argv) {
			continue
		}
		if len(p.Argv) == 3 && p.Argv[0] == "sh" && p.Argv[1] == "-c" &&
			slices.ContainsFunc(launcher.Argv, func(w string) bool { return strings.Contains(w, p.Argv[2]) }) {
			continue
		}
		t.Fatalf("%q: opaque subject %d (%s) names launcher %d (%s), which does not start it", command, j, p, p.Launcher, launcher)
	}
}

func mustGrant(tb testing.TB, s string) capability.Grant {
	tb.Helper()
	g, err := capability.Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}
