//go:build unix

// The fifth hostile review of the shell tool (issue 17). Each test failed
// while the bypass it names was open: bash's test -v evaluating a
// subscript, $"…" translated from a catalogue TEXTDOMAIN names (now
// guarded, and $"…" and upper-case loop names beyond an inner script's
// plain part), and launchers no table knew (logsave, fstab-decode: now
// opaque).

package shell

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/tool"
)

// r4Policy is r3's brief: the reviewed programs plus the launchers named in
// extra, recursive rm denied by rule.
func r4Policy(extra ...string) string {
	grants := []string{"fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:bash", "exec:dash", "exec:cp", "exec:cat",
		"exec:rm", "exec:timeout", "exec:env", "exec:xargs", "exec:find", "exec:printf", "exec:sed", "exec:echo"}
	for _, e := range extra {
		grants = append(grants, "exec:"+e)
	}
	return `version: 1
grants: ["` + strings.Join(grants, `", "`) + `"]
rules:
  - {name: no-recursive-rm, tool: shell, command: ["rm ** -*r*", "rm ** -*R*", "rm ** --recursive*"], action: deny}
  - {tool: shell, action: allow}
`
}

// r4Run runs cmd under r4Policy(extra...) in a workspace repository holding
// src/main.go; it reports whether src survived.
func r4Run(t *testing.T, extra []string, setup func(ws string), cmd string) (tool.Result, bool) {
	t.Helper()
	var s func(t *testing.T, ws string)
	if setup != nil {
		s = func(_ *testing.T, ws string) { setup(ws) }
	}
	return policyRun(t, r4Policy(extra...), nil, s, cmd)
}

func r4Cases(t *testing.T, extra []string, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		t.Run(cmd, func(t *testing.T) {
			if _, ok := r4Run(t, extra, nil, cmd); !ok {
				t.Errorf("BYPASS: src was removed")
			}
		})
	}
}

// r4Inner single-quotes each script as the -c script of shell.
func r4Inner(t *testing.T, extra []string, shell string, scripts ...string) {
	t.Helper()
	var cmds []string
	for _, s := range scripts {
		cmds = append(cmds, shell+" -c '"+strings.ReplaceAll(s, "'", `'\''`)+"'")
	}
	r4Cases(t, extra, cmds...)
}

// bash's test -v evaluates the subscript of NAME[SUB] as arithmetic, with
// $(…) expanded: the $(…) runs. testNames checks -v's operand only when
// the command is spelled test or an unquoted [, and the operator a
// literal -v: a quoted '[' or a -v from a variable is not looked at, and
// the $(…) is in single quotes, so no reading lists rm.
func TestShellHostileR4TestVSubscript(t *testing.T) {
	r4Inner(t, nil, "bash",
		`'[' -v 'a[$(rm -rf src)]' ']'`,
		`\[ -v 'a[$(rm -rf src)]' ']'`,
		`o=-v; test $o 'a[$(rm -rf src)]'`,
		`for o in -v; do test "$o" 'a[$(rm -rf src)]'; done`,
	)
}

// Launchers installed here that are in neither the launcher table nor
// starters: what they run is no subject of the command rules, and the
// sandbox lets it run (exec:rm is granted).
func TestShellHostileR4UnmodelledLaunchers(t *testing.T) {
	for _, c := range []struct{ prog, cmd string }{
		{"choom", "choom -n 0 -- rm -rf src"},       // util-linux
		{"logsave", "logsave /dev/null rm -rf src"}, // e2fsprogs, /usr/sbin
		{"fstab-decode", "fstab-decode rm -rf src"}, // initscripts/sysvinit-utils
	} {
		if _, err := os.Stat("/usr/bin/" + c.prog); err != nil {
			if _, err := os.Stat("/usr/sbin/" + c.prog); err != nil {
				continue
			}
		}
		r4Cases(t, []string{c.prog}, c.cmd)
	}
}

// moFile is a GNU message catalogue translating msgid to msgstr.
func moFile(msgid, msgstr string) []byte {
	le := func(b []byte, v int) []byte { return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	var b []byte
	for _, v := range []int{0x950412de, 0, 1, 28, 36, 0, 44} { // magic, revision, count, tables, no hash
		b = le(b, v)
	}
	b = le(le(b, len(msgid)), 44)
	b = le(le(b, len(msgstr)), 44+len(msgid)+1)
	return append(append(append(b, msgid...), 0), append([]byte(msgstr), 0)...)
}

// bash translates a $"…" string with the catalogue TEXTDOMAIN and
// TEXTDOMAINDIR name (in a locale other than C or POSIX), and expands the
// translation as a double-quoted string: a $(…) in it runs. plainScript
// accepts $"…" (a DblQuoted with Dollar), and a for loop's variable may
// have any name (lowerName holds only for assignments), none of the three
// variables is guarded, and the catalogue is a file of the workspace (here
// the repository's; printf can write it where the directories exist).
// bash translates as it parses, so the assignments are on earlier lines.
func TestShellHostileR4Translation(t *testing.T) {
	setup := func(ws string) {
		tooltest.WriteFile(t, filepath.Join(ws, "tx", "C.UTF-8", "LC_MESSAGES", "d.mo"), string(moFile("x", "$(rm -rf src)")), 0o644)
	}
	for _, cmd := range []string{
		"bash -c 'for LC_ALL in C.UTF-8; do :; done\nfor TEXTDOMAINDIR in $PWD/tx; do :; done\nfor TEXTDOMAIN in d; do :; done\necho $\"x\"'",
		`LC_ALL=C.UTF-8 TEXTDOMAINDIR=$PWD/tx TEXTDOMAIN=d bash -c 'echo $"x"'`,
		`env LC_ALL=C.UTF-8 TEXTDOMAINDIR=tx TEXTDOMAIN=d bash -c 'echo $"x"'`,
	} {
		t.Run(cmd, func(t *testing.T) {
			if _, ok := r4Run(t, nil, setup, cmd); !ok {
				t.Errorf("BYPASS: src was removed")
			}
		})
	}
}
