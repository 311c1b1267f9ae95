package git

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"
)

// patchSeeds are patches as git diff, diff -u and git format-patch write
// them, and the hostile shapes the tests refuse.
var patchSeeds = []string{
	unoPatch,
	goodPatch,
	"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
	"diff --git a/a b c b/a b c\nnew file mode 100644\n",
	"diff --git \"a/caf\\303\\251\" \"b/caf\\303\\251\"\n--- \"a/caf\\303\\251\"\n+++ \"b/caf\\303\\251\"\n@@ -1 +1 @@\n-a\n+b\n",
	"diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n",
	"diff --git a/x b/y\nrename from x\nrename to y\n",
	"--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- ../../etc/passwd\n+++ /etc/shadow\n-rename to .git/config\n+new mode 120000\n",
	"From 1 Mon\nSubject: [PATCH] x\n\nmessage\n---\n x | 2 +-\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.5\n",
	"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\ndiff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
	"--- a/.GIT/config\n+++ b/.GIT/config\n@@ -1 +1 @@\n-a\n+b\n",
	"diff --git a/m b/m\nnew file mode 160000\nindex 0000000..1234567\n--- /dev/null\n+++ b/m\n@@ -0,0 +1 @@\n+Subproject commit 1234567\n",
	"diff --git a/l b/l\nold mode 100644\nnew mode 100755\n",
	"diff --git a/x b/y\nrename from x/.gi\ncopy from t/config\nrename to y\n",
}

// FuzzParsePatch: warden's reading of a patch (parsePatch, before git
// sees it) never panics and is deterministic; a refusal is
// PATCH_REJECTED; an accepted patch names only paths that pass the path
// checks, writes what its files say (Written: sorted, each once, among
// Names), resolves inside a workspace (patchTargets) to exactly those
// paths, and each file's section of the patch, read alone, is that file.
func FuzzParsePatch(f *testing.F) {
	for _, s := range patchSeeds {
		f.Add(s)
	}
	ws, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, patch string) {
		p, e := parsePatch(patch)
		p2, e2 := parsePatch(patch)
		if !reflect.DeepEqual(p, p2) || !reflect.DeepEqual(e, e2) {
			t.Fatalf("two readings of %q differ: %+v %v / %+v %v", patch, p, e, p2, e2)
		}
		if e != nil {
			if e.Code != tool.CodePatchRejected || e.Message == "" {
				t.Fatalf("refusal of %q: %+v", patch, e)
			}
			return
		}
		if len(p.Files) == 0 {
			t.Fatalf("%q accepted with no file", patch)
		}
		for n := range p.Names {
			if e := checkPatchPath(n); e != nil {
				t.Fatalf("%q accepted with the name %q: %v", patch, n, e.Message)
			}
		}
		if !slices.IsSorted(p.Written) || len(slices.Compact(slices.Clone(p.Written))) != len(p.Written) {
			t.Fatalf("%q: written %q is not sorted and unique", patch, p.Written)
		}
		want := map[string]bool{}
		end := 0
		for i, fl := range p.Files {
			switch fl.Action {
			case "create":
				if fl.OldPath != "" || fl.NewPath == "" {
					t.Fatalf("%q: file %d %+v", patch, i, fl)
				}
			case "delete":
				if fl.OldPath == "" || fl.NewPath != "" {
					t.Fatalf("%q: file %d %+v", patch, i, fl)
				}
				want[fl.OldPath] = true
			case "modify", "rename", "copy":
				if fl.OldPath == "" || fl.NewPath == "" {
					t.Fatalf("%q: file %d %+v", patch, i, fl)
				}
				if fl.Action == "rename" {
					want[fl.OldPath] = true
				}
			default:
				t.Fatalf("%q: file %d has action %q", patch, i, fl.Action)
			}
			if fl.NewPath != "" {
				want[fl.NewPath] = true
			}
			for _, n := range []string{fl.OldPath, fl.NewPath} {
				if n != "" && !p.Names[n] {
					t.Fatalf("%q: file %d's %q is not among the names", patch, i, n)
				}
			}
			if fl.Start < end || fl.End < fl.Start || fl.End > len(patch) {
				t.Fatalf("%q: file %d's section [%d,%d) after %d", patch, i, fl.Start, fl.End, end)
			}
			end = fl.End
			// The section alone reads as the same file.
			alone, e := parsePatch(patch[fl.Start:fl.End])
			if e != nil {
				t.Fatalf("%q: file %d's section %q alone: %v", patch, i, patch[fl.Start:fl.End], e.Message)
			}
			got := alone.Files[0]
			got.Start, got.End = got.Start+fl.Start, got.End+fl.Start
			if len(alone.Files) != 1 || got != fl {
				t.Fatalf("%q: file %d (%+v) alone reads as %+v", patch, i, fl, alone.Files)
			}
		}
		if !reflect.DeepEqual(p.Written, slices.Sorted(func(yield func(string) bool) {
			for w := range want {
				if !yield(w) {
					return
				}
			}
		})) {
			t.Fatalf("%q: written %q, the files write %v", patch, p.Written, want)
		}
		abs, e := patchTargets(ws, p)
		if e != nil && strings.Contains(e.Message, "file name too long") {
			return // refused there, by the file system
		}
		if e != nil {
			t.Fatalf("%q: accepted, but its targets are refused in a plain workspace: %v", patch, e.Message)
		}
		for i, a := range abs {
			if a != ws+"/"+p.Written[i] {
				t.Fatalf("%q: %q resolves to %s", patch, p.Written[i], a)
			}
		}
	})
}
