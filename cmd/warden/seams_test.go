package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression tests for holes found where separately built pieces meet:
// warden's own files hidden whatever the path to them, removal of a
// parent of a hidden path, secrets in a rule's matcher on the audit log,
// nested workflow files and hide:, and argument order around --.

// TestOwnFilesOutOfReach: warden's home under the workspace — reached
// through a parent's removal, a symlinked --home, a home whose name holds
// glob characters — stays out of every tool's reach.
func TestOwnFilesOutOfReach(t *testing.T) {
	ws := t.TempDir()
	ws, _ = filepath.EvalSymlinks(ws)
	for _, home := range []string{filepath.Join(ws, "sub", "wh"), filepath.Join(ws, "h[1]{x}")} {
		if code, out, errs := runWS(t, home, ws, "memory", "put", "n", "v"); code != 0 {
			t.Fatalf("memory put: %s %s", out, errs)
		}
		rel, _ := filepath.Rel(ws, home)
		if code, out, _ := runWS(t, home, ws, "--grant", "fs.read:**", "call", "fs_read", "--args", `{"path":"`+rel+`/audit.head"}`); code == 0 || !strings.Contains(out, "CAPABILITY_DENIED") {
			t.Errorf("home %s: fs_read of audit.head: %d %s", rel, code, out)
		}
	}
	home := filepath.Join(ws, "sub", "wh")
	code, out, _ := runWS(t, home, ws, "--grant", "fs.write:**", "--grant", "fs.read:**", "call", "fs_remove", "--args", `{"path":"sub","recursive":true}`)
	if code == 0 || !strings.Contains(out, "hidden") {
		t.Errorf("fs_remove of the home's parent: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(home, "warden.db")); err != nil {
		t.Fatalf("the store is gone: %v", err)
	}
	// A --home through a symlink: the tools reach the same files by the
	// resolved path.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	lhome := filepath.Join(link, ".wh")
	runWS(t, lhome, ws, "memory", "put", "n", "v")
	code, out, _ = runWS(t, lhome, ws, "--grant", "fs.write:**", "call", "fs_write", "--args", `{"path":".wh/policy.yaml","content":"version: 1\ngrants: [\"exec:*\"]\n"}`)
	if code == 0 || !strings.Contains(out, "CAPABILITY_DENIED") {
		t.Errorf("fs_write into a symlinked home: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(ws, ".wh", "policy.yaml")); err == nil {
		t.Fatal("the home policy was written")
	}
}

// TestRuleMatcherSecretsNotRecorded: the matcher of a rule on arguments
// names the value it matched; on the audit log that value is masked like
// the arguments.
func TestRuleMatcherSecretsNotRecorded(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	const key = "AKIAIOSFODNN7EXAMPLE"
	writeFile(t, filepath.Join(home, "policy.yaml"), "version: 1\ngrants: [\"fs.read:**\", \"fs.write:**\"]\nrules:\n  - {tool: fs_write, args: {content: \"*AKIA*\"}, action: allow, dry_run_first: true}\n")
	runWS(t, home, ws, "call", "fs_write", "--args", `{"path":"k.txt","content":"aws_access_key_id = `+key+`\n"}`)
	_, audit, _ := runWS(t, home, ws, "audit", "ls", "--json")
	if strings.Contains(audit, key) {
		t.Fatalf("the key is on the audit log:\n%s", audit)
	}
	if !strings.Contains(audit, `args.content`) {
		t.Fatalf("the matcher is not on the record:\n%s", audit)
	}
}

// TestNestedWorkflowHidden: a workflow that includes a hidden file is
// refused, and nothing of the file shows.
func TestNestedWorkflowHidden(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, "policy.yaml"), "version: 1\ngrants: [\"fs.read:**\"]\nhide: [secret.yaml]\n")
	writeFile(t, filepath.Join(ws, "outer.yaml"), "version: 1\nname: outer\nsteps:\n  - {id: n, workflow: secret.yaml}\n")
	writeFile(t, filepath.Join(ws, "secret.yaml"), "version: 1\nname: s\nsteps:\n  - {id: x, tool: hunter2secretvalue}\n")
	_, out, errs := runWS(t, home, ws, "call", "workflow_validate", "-a", "path=outer.yaml")
	if strings.Contains(out+errs, "hunter2secretvalue") || !strings.Contains(out, "hide") {
		t.Fatalf("workflow_validate of a workflow including a hidden file:\n%s\n%s", out, errs)
	}
}

// TestArgsAfterDashes: -- ends the flags, before or after a positional.
func TestArgsAfterDashes(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	for _, args := range [][]string{{"memory", "put", "--", "k1", "-v1"}, {"memory", "put", "k2", "--", "-v2"}} {
		if code, out, errs := runWS(t, home, ws, args...); code != 0 {
			t.Fatalf("%v: %d %s %s", args, code, out, errs)
		}
	}
	for k, v := range map[string]string{"k1": "-v1", "k2": "-v2"} {
		if _, out, _ := runWS(t, home, ws, "memory", "get", k); strings.TrimSpace(out) != v {
			t.Errorf("memory get %s = %q, want %q", k, out, v)
		}
	}
}
