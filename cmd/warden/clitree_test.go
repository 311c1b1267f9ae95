package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
)

// leaves lists every command that runs something, by its full path.
func leaves(cmds []*cli.Command, path string) []string {
	var out []string
	for _, c := range cmds {
		full := strings.TrimSpace(path + " " + c.Name)
		if len(c.Subcommands) > 0 {
			out = append(out, leaves(c.Subcommands, full)...)
			continue
		}
		out = append(out, full)
	}
	return out
}

// TestCommandTreeUsageHints: every command, given a flag it does not
// have, fails with a usage error whose hint is a command that works.
func TestCommandTreeUsageHints(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	app := newApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	hint := regexp.MustCompile("see `(warden[^`]*)`")
	n := 0
	for _, path := range leaves(app.Commands, "") {
		code, _, errs := runWS(t, home, ws, append(strings.Fields(path), "--no-such-flag")...)
		if code != env.ExitUsage {
			t.Errorf("%s --no-such-flag: exit %d\n%s", path, code, errs)
			continue
		}
		m := hint.FindStringSubmatch(errs)
		if m == nil {
			t.Errorf("%s: no hint naming a command in %q", path, errs)
			continue
		}
		args := strings.Fields(m[1])[1:]
		if code, out, errs := runWS(t, home, ws, args...); code != env.ExitOK || out == "" {
			t.Errorf("%s: its hint %q does not work: exit %d %s", path, m[1], code, errs)
		}
		n++
	}
	if n < 40 {
		t.Errorf("only %d commands walked", n)
	}
}

// TestCommandTreeJSON: --json gives JSON before or after the command, for
// every command that prints something on a fresh home (those that need
// arguments or a model are tested with them elsewhere).
func TestCommandTreeJSON(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	cmds := [][]string{
		{"version"}, {"tools"}, {"tool", "ls"}, {"audit", "ls"}, {"audit", "verify"}, {"memory", "ls"},
		{"runs", "ls"}, {"schedule", "ls"}, {"grant", "ls"}, {"sandbox", "check"}, {"policy", "default"},
		{"policy", "trust", "--list"}, {"policy", "explain", "system", "--args", `{"operation":"get_info"}`},
		{"store", "status"}, {"call", "system", "--args", `{"operation":"get_info"}`}, {"workflow", "schema"},
	}
	for _, c := range cmds {
		for _, args := range [][]string{append([]string{"--json"}, c...), append(append([]string{}, c...), "--json")} {
			code, out, errs := runWS(t, home, ws, args...)
			if code != env.ExitOK || !json.Valid([]byte(out)) {
				t.Errorf("warden %s: exit %d, not JSON:\n%s\n%s", strings.Join(args, " "), code, out, errs)
			}
		}
	}

	// The commands that change a job, given one: each run of the sequence
	// adds the job, changes it, approves its changed workflow (and then
	// the unchanged one), and removes it.
	wf := filepath.Join(ws, "tick.yaml")
	const tick = "version: 1\nname: tick\ngrants: [\"fs.read:**\"]\nsteps:\n  - {id: r, tool: fs_read, args: {path: tick.yaml}}\n"
	for _, before := range []bool{true, false} {
		if err := os.WriteFile(wf, []byte(tick), 0o600); err != nil {
			t.Fatal(err)
		}
		seq := [][]string{
			{"schedule", "add", "j", "--workflow", wf, "--every", "1h", "--yes"},
			{"schedule", "show", "j"}, {"schedule", "pause", "j"}, {"schedule", "resume", "j"},
			{"edit"}, {"schedule", "approve", "j", "--yes"}, {"schedule", "approve", "j"},
			{"schedule", "rm", "j"},
		}
		for _, c := range seq {
			if c[0] == "edit" {
				if err := os.WriteFile(wf, []byte(tick+"# changed\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				continue
			}
			args := append(append([]string{}, c...), "--json")
			if before {
				args = append([]string{"--json"}, c...)
			}
			code, out, errs := runWS(t, home, ws, args...)
			var v map[string]any
			if code != env.ExitOK || json.Unmarshal([]byte(out), &v) != nil || v["job"] != "j" && v["id"] != "j" {
				t.Errorf("warden %s: exit %d, not JSON naming the job:\n%s\n%s", strings.Join(args, " "), code, out, errs)
			}
		}
	}
}
