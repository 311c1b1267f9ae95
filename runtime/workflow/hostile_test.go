package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
)

// TestHostileFiles: files built to exhaust the parser or the process are
// refused quickly, with a position: deep nesting (the YAML parser took 46 s
// and 15 GB for 100,000 levels), alias bombs, deep or long conditions.
func TestHostileFiles(t *testing.T) {
	head := "version: 1\nname: h\nsteps:\n  - id: a\n    tool: analyze\n"
	laughs := "version: 1\nname: h\nx: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\nsteps:\n  - id: a\n    tool: analyze\n    args: {text: *a}\n"
	for name, tt := range map[string]struct{ src, want string }{
		"deep brackets":  {head + "    args: {text: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}\n", "nested deeper than 64"},
		"alias bomb":     {laughs, "anchors (&name) are not allowed"},
		"deep condition": {head + "    when: ${{ " + strings.Repeat("(", 3000) + "true" + strings.Repeat(")", 3000) + " }}\n", "longer than"},
		"nested parens":  {head + "    when: ${{ " + strings.Repeat("(", 40) + "true" + strings.Repeat(")", 40) + " }}\n", "nests deeper than 32"},
		"deep negation":  {head + "    when: ${{ " + strings.Repeat("!", 100) + "true }}\n", "nests deeper than 32"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := workflow.Parse("h.yaml", []byte(tt.src), workflow.Options{})
			var pe *gate.PositionError
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &pe) || pe.Line == 0 {
				t.Fatalf("got %v", err)
			}
		})
	}
	// Brackets inside strings and comments are not nesting.
	ok := head + "    args: {text: \"" + strings.Repeat("[", 200) + "\"}  # " + strings.Repeat("{", 200) + "\n"
	if _, err := workflow.Parse("ok.yaml", []byte(ok), workflow.Options{}); err != nil {
		t.Fatalf("quoted brackets: %v", err)
	}
}

// TestNestedTotalBudget: a workflow may include many files, but not more
// than MaxTotalBytes of them in all (every one parsed stays in memory
// while the whole is checked).
func TestNestedTotalBudget(t *testing.T) {
	dir := t.TempDir()
	big := "version: 1\nname: n\ndescription: \"" + strings.Repeat("a", 900<<10) + "\"\nsteps: [{id: a, tool: analyze}]\n"
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	var top strings.Builder
	top.WriteString("version: 1\nname: top\nsteps:\n")
	for i := 0; i < 8; i++ {
		if err := os.Symlink("big.yaml", filepath.Join(dir, fmt.Sprintf("n%d.yaml", i))); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&top, "  - {id: s%d, workflow: n%d.yaml}\n", i, i)
	}
	o := workflow.Options{Open: openFiles(nil)}
	_, err := workflow.Parse(filepath.Join(dir, "top.yaml"), []byte(top.String()), o)
	var pe *gate.PositionError
	if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "top.yaml:8:") || !strings.Contains(err.Error(), "more than 4194304 bytes") {
		t.Fatalf("got %v", err)
	}
}

// TestNestedTokenBudget: files each within the token budget cannot add up
// to an unbounded parse — the workflow and its includes share
// MaxTotalTokens (200 includes of one dense 19 KB file once took 27 s and
// 1.5 GB, within MaxTotalBytes); a workflow whose includes fit is
// accepted.
func TestNestedTokenBudget(t *testing.T) {
	dir := t.TempDir()
	var big strings.Builder
	big.WriteString("version: 1\nname: n\nparams:\n  p: {type: array, default: [")
	big.WriteString(strings.Repeat("1,", 9500))
	big.WriteString("1]}\nsteps:\n  - {id: a, tool: analyze}\n")
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var opens atomic.Int64
	o := workflow.Options{Open: openFiles(&opens)}
	top := func(n int) string {
		var b strings.Builder
		b.WriteString("version: 1\nname: top\nsteps:\n")
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("n%d.yaml", i)
			if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
				if err := os.Symlink("big.yaml", filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			fmt.Fprintf(&b, "  - {id: s%d, workflow: %s}\n", i, name)
		}
		return b.String()
	}
	if _, err := workflow.Parse(filepath.Join(dir, "two.yaml"), []byte(top(2)), o); err != nil {
		t.Fatalf("two includes within the budget: %v", err)
	}
	opens.Store(0)
	_, err := workflow.Parse(filepath.Join(dir, "top.yaml"), []byte(top(200)), o)
	var pe *gate.PositionError
	if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "budget this file shares") {
		t.Fatalf("got %v", err)
	}
	// Refused at the third file: nothing past it is parsed.
	if n := opens.Load(); n > 3 {
		t.Fatalf("%d files opened; the budget ran out at the third", n)
	}
}

// TestNestedReadsCount: every file read for an include counts against
// MaxTotalBytes, found in the cache or not — it is read and hashed to be
// looked up, so 1,900 includes of one 1 MiB file would read 1.9 GB.
func TestNestedReadsCount(t *testing.T) {
	dir := t.TempDir()
	b := "version: 1\nname: b\nsteps: [{id: a, tool: analyze}]\n# " + strings.Repeat("c", 1<<20-64) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	var top strings.Builder
	top.WriteString("version: 1\nname: top\nsteps:\n")
	for i := 0; i < 1900; i++ {
		fmt.Fprintf(&top, "  - {id: s%d, workflow: b.yaml}\n", i)
	}
	var opens atomic.Int64
	o := workflow.Options{Open: openFiles(&opens)}
	_, err := workflow.Parse(filepath.Join(dir, "top.yaml"), []byte(top.String()), o)
	if err == nil || !strings.Contains(err.Error(), "more than 4194304 bytes") {
		t.Fatalf("got %v", err)
	}
	// Four files fit in 4 MiB; the fifth is refused, and nothing more is
	// opened.
	if n := opens.Load(); n > 5 {
		t.Fatalf("%d opens: the budget ran out at the fifth", n)
	}
}

// TestNestedFilesParsedOnce: a file used by many steps is parsed once, so
// a fan-out does not multiply the work level by level.
func TestNestedFilesParsedOnce(t *testing.T) {
	dir := t.TempDir()
	const fan = 20
	for level := 0; level < 3; level++ {
		var b strings.Builder
		fmt.Fprintf(&b, "version: 1\nname: l%d\nsteps:\n", level)
		for i := 0; i < fan; i++ {
			if level < 2 {
				fmt.Fprintf(&b, "  - {id: s%d, workflow: l%d.yaml}\n", i, level+1)
			} else {
				fmt.Fprintf(&b, "  - {id: s%d, tool: analyze, args: {text: x}}\n", i)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("l%d.yaml", level)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var opens atomic.Int64
	o := workflow.Options{Open: openFiles(&opens)}
	top := filepath.Join(dir, "l0.yaml")
	data, _ := os.ReadFile(top)
	if _, err := workflow.Parse(top, data, o); err != nil {
		t.Fatal(err)
	}
	// 20 opens of l1 from l0, 20 of l2 from l1 (parsed once); without the
	// cache, 20 + 400.
	if n := opens.Load(); n > 2*fan {
		t.Fatalf("%d opens for a fan-out of %d", n, fan)
	}
}

// TestResumeRefusals: a resume of a changed file, or in another mode, is
// refused; an optional param with no value survives a resume; a grants:
// key with no value means none.
func TestResumeRefusals(t *testing.T) {
	e := newEnv(t, `"fs.read:**", "fs.write:**"`)
	src := "version: 1\nname: r\nparams:\n  note: {type: string}\ngrants: [\"fs.read:**\"]\nsteps:\n  - {id: a, tool: analyze, args: {text: x}}\n  - {id: b, tool: fs_read, args: {path: later.txt}}\n"
	w := e.parse("r.yaml", src)
	rec := e.run(w, workflow.RunOptions{})
	if rec.Status != workflow.StatusFailed {
		t.Fatalf("%s", rec.Status)
	}
	saved, _ := e.runs.Run(rec.ID)
	var prev workflow.Record
	if err := json.Unmarshal(saved, &prev); err != nil {
		t.Fatal(err)
	}
	// Another mode.
	if _, err := workflow.Run(context.Background(), w, workflow.RunOptions{Gate: e.gate, Resume: &prev, DryRun: true, Params: prev.Params}); err == nil || !strings.Contains(err.Error(), "not a dry run") {
		t.Errorf("dry-run resume of a real run: %v", err)
	}
	// A changed file: a step inserted before the failed one.
	changed := e.parse("r.yaml", strings.Replace(src, "  - {id: b,", "  - {id: guard, tool: analyze, args: {text: y}}\n  - {id: b,", 1))
	if _, err := workflow.Run(context.Background(), changed, workflow.RunOptions{Gate: e.gate, Resume: &prev, Params: prev.Params}); err == nil || !strings.Contains(err.Error(), "changed since run") {
		t.Errorf("resume of a changed file: %v", err)
	}
	// The same file, fixed cause: the optional param (recorded as null)
	// does not stop the resume.
	e.write("later.txt", "now")
	again, err := workflow.Run(context.Background(), w, workflow.RunOptions{Gate: e.gate, Resume: &prev, Params: prev.Params, Runs: e.runs})
	if err != nil || again.Status != workflow.StatusSucceeded {
		t.Fatalf("%v %+v", err, again)
	}
	// grants: with nothing after it is no grants.
	none := e.parse("n.yaml", "version: 1\nname: n\ngrants:\nsteps:\n  - {id: a, tool: fs_read, args: {path: later.txt}}\n")
	if none.Grants == nil {
		t.Fatal("a grants: key with no value read as absent")
	}
	if rec := e.run(none, workflow.RunOptions{}); rec.Status != workflow.StatusFailed || rec.Error.Code != tool.CodeCapabilityDenied {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
}

// openFiles is an Options.Open over the file system, relative to the
// including file, counting its opens in opens (if not nil).
func openFiles(opens *atomic.Int64) func(from, p string) (string, []byte, error) {
	return func(from, p string) (string, []byte, error) {
		if opens != nil {
			opens.Add(1)
		}
		src := filepath.Join(filepath.Dir(from), p)
		b, err := os.ReadFile(src)
		return src, b, err
	}
}
