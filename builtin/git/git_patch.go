package git

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// ---- git_apply_patch ------------------------------------------------------

type applyPatchTool struct{ g *runner }

func (t *applyPatchTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "git_apply_patch",
		Description: "Apply a unified diff to the working tree of the workspace's git repository (git apply; the index is not touched). " +
			"Refused before git sees it: paths with .., absolute paths, paths in .git/ or .warden/, symlinks, submodules and binary patches. " +
			"The patch is checked first and applied all or nothing. check:true only checks.",
		Capabilities: []capability.Kind{capability.GitRead, capability.GitWrite, capability.FSWrite},
	}
}

type applyPatchArgs struct {
	Patch string `json:"patch" minLength:"1" maxLength:"1000000" jsonschema:"a unified diff as git diff writes it (a/ and b/ prefixes, applied with -p1) or a traditional diff -u with one leading directory; text files only"`
	Check bool   `json:"check,omitempty" jsonschema:"only check that the patch applies cleanly; change nothing (default false: apply it)"`
}

// Needs: check only reads (git.read). Applying needs git.write and, since
// it writes files of the working tree, fs.write on every path the patch
// creates, modifies, deletes or renames (both sides), resolved like every fs
// need. A patch that fails the path checks is refused here, before anything
// runs.
func (t *applyPatchTool) Needs(c *tool.Call, a *applyPatchArgs) ([]capability.Need, error) {
	p, e := parsePatch(a.Patch)
	if e != nil {
		return nil, e
	}
	abs, e := patchTargets(c.Workspace, p)
	if e != nil {
		return nil, e
	}
	if a.Check {
		return readNeeds(), nil
	}
	needs := []capability.Need{{Kind: capability.GitWrite}}
	for _, p := range abs {
		needs = append(needs, capability.Need{Kind: capability.FSWrite, Resource: p})
	}
	return needs, nil
}

// Sinks: the hunks of each file's section land in that file (the new
// path; the old one for a deletion). Headers are not sinks: a mask in a
// file name is refused.
func (t *applyPatchTool) Sinks(c *tool.Call, a *applyPatchArgs) ([]tool.Sink, error) {
	p, e := parsePatch(a.Patch)
	if e != nil {
		return nil, e
	}
	var sinks []tool.Sink
	for _, f := range p.Files {
		name := f.NewPath
		if name == "" {
			name = f.OldPath
		}
		abs, err := capability.ResolvePath(c.Workspace, name)
		if err != nil {
			return nil, reject("path %q: %v", name, err)
		}
		section := a.Patch[f.Start:f.End]
		hunks := strings.Index(section, "\n@@ ")
		if hunks < 0 {
			continue
		}
		sinks = append(sinks, tool.Sink{Arg: "/patch", Start: f.Start + hunks + 1, End: f.End, Path: abs})
	}
	return sinks, nil
}

// PatchFile is one file a patch touches.
type PatchFile struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"`
	// Action is create, modify, delete, rename or copy.
	Action  string `json:"action"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
}

// PatchResult is git_apply_patch's data.
type PatchResult struct {
	Applied    bool        `json:"applied"`
	CheckOnly  bool        `json:"check_only"`
	Applies    bool        `json:"applies"`
	Files      []PatchFile `json:"files"`
	Stat       string      `json:"stat,omitempty"`
	ReturnCode int         `json:"returncode"`
	Argv       []string    `json:"argv"`
}

// prepare parses and vets the patch, then asks git how it reads it and
// refuses any difference from warden's own reading.
func (t *applyPatchTool) prepare(ctx context.Context, c *tool.Call, a *applyPatchArgs) (*session, *gitPatch, PatchResult, *tool.Error) {
	var res PatchResult
	p, e := parsePatch(a.Patch)
	if e != nil {
		return nil, nil, res, e
	}
	if _, e := patchTargets(c.Workspace, p); e != nil {
		return nil, nil, res, e
	}
	res.CheckOnly = a.Check
	s, e := t.g.open(ctx, c, a.Check || c.DryRun)
	if e != nil {
		return nil, nil, res, e
	}
	out, e := s.run(strings.NewReader(a.Patch), maxParse, "apply", "--numstat", "--summary", "-z")
	if e != nil {
		s.close()
		return nil, nil, res, e
	}
	if out.Code != 0 {
		s.close()
		res.ReturnCode = out.Code
		return nil, nil, res, tool.Errorf(tool.CodePatchRejected, "fix the patch: it must be a unified diff (git diff output)",
			"git cannot read the patch: %s", strings.TrimSpace(out.Stderr))
	}
	counts, e := crossCheckPatch(p, out.Stdout)
	if e != nil {
		s.close()
		return nil, nil, res, e
	}
	for _, f := range p.Files {
		gf := PatchFile{Path: f.NewPath, OldPath: f.OldPath, Action: f.Action}
		if f.Action == "delete" {
			gf.Path, gf.OldPath = f.OldPath, ""
		}
		if f.Action == "modify" || f.Action == "create" {
			gf.OldPath = ""
		}
		if n, ok := counts[gf.Path]; ok {
			gf.Added, gf.Deleted = n[0], n[1]
		}
		res.Files = append(res.Files, gf)
	}
	return s, p, res, nil
}

// applyCheck runs `git apply --check` (with extra flags) on the patch and
// records the outcome in res; ok is false with the outcome to return when
// the patch does not apply or git could not run.
func applyCheck(s *session, patch string, res *PatchResult, extra ...string) (gitOut, tool.Outcome, bool) {
	out, e := s.run(strings.NewReader(patch), maxParse, append([]string{"apply", "--check"}, extra...)...)
	if e != nil {
		return out, tool.Outcome{Err: e}, false
	}
	res.ReturnCode = out.Code
	if out.Code != 0 {
		return out, tool.Outcome{Data: res, Err: tool.Errorf(tool.CodePatchRejected,
			"the patch does not match the working tree; regenerate it against the current files (git_diff shows them)",
			"the patch does not apply: %s", strings.TrimSpace(out.Stderr))}, false
	}
	res.Applies = true
	return out, tool.Outcome{}, true
}

// Preview checks the patch against the working tree (git apply --check
// --stat --summary) and shows the files it would touch, the stat and the
// patch itself. Nothing is written.
func (t *applyPatchTool) Preview(ctx context.Context, c *tool.Call, a *applyPatchArgs) tool.Outcome {
	s, _, res, e := t.prepare(ctx, c, a)
	if e != nil {
		return tool.Outcome{Err: e, Data: res}
	}
	defer s.close()
	out, o, ok := applyCheck(s, a.Patch, &res, "--stat", "--summary")
	if !ok {
		return o
	}
	res.Stat = strings.TrimRight(string(out.Stdout), "\n")
	res.Argv = gitArgv("apply")
	verb := "would apply"
	if a.Check {
		verb = "would check (and not apply)"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s the patch to %d file(s) with: %s < patch\n", verb, len(res.Files), quoteArgv(res.Argv))
	for _, f := range res.Files {
		fmt.Fprintf(&sb, "  %s %s", f.Action, f.Path)
		if f.OldPath != "" {
			fmt.Fprintf(&sb, " (from %s)", f.OldPath)
		}
		sb.WriteByte('\n')
	}
	sb.WriteString(res.Stat + "\n\n" + capText(a.Patch, t.g.o.MaxOutput))
	return tool.Outcome{Output: sb.String(), Data: res, Warnings: patchWarnings(res)}
}

func (t *applyPatchTool) Run(ctx context.Context, c *tool.Call, a *applyPatchArgs) tool.Outcome {
	s, _, res, e := t.prepare(ctx, c, a)
	if e != nil {
		return tool.Outcome{Err: e, Data: res}
	}
	defer s.close()
	out, o, ok := applyCheck(s, a.Patch, &res)
	if !ok {
		return o
	}
	if a.Check {
		res.Argv = gitArgv("apply", "--check")
		return tool.Outcome{Output: fmt.Sprintf("the patch applies cleanly to %d file(s); nothing was changed (check only)", len(res.Files)), Data: res}
	}
	res.Argv = gitArgv("apply")
	out, e = s.run(strings.NewReader(a.Patch), maxParse, "apply")
	if e != nil {
		return tool.Outcome{Err: e}
	}
	res.ReturnCode = out.Code
	if out.Code != 0 {
		return tool.Outcome{Data: res, Err: tool.Errorf(tool.CodePatchRejected, "check the working tree with git_status",
			"git apply failed: %s", strings.TrimSpace(out.Stderr))}
	}
	res.Applied = true
	var sb strings.Builder
	fmt.Fprintf(&sb, "applied the patch to %d file(s):\n", len(res.Files))
	for _, f := range res.Files {
		fmt.Fprintf(&sb, "  %s %s (+%d -%d)\n", f.Action, f.Path, f.Added, f.Deleted)
	}
	warnings := patchWarnings(res)
	for _, l := range strings.Split(out.Stderr, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "warning:") {
			warnings = append(warnings, l)
		}
	}
	return tool.Outcome{Output: sb.String(), Data: res, Warnings: warnings}
}

func patchWarnings(res PatchResult) []string {
	var w []string
	for _, f := range res.Files {
		switch f.Action {
		case "delete":
			w = append(w, "deletes "+f.Path)
		case "rename":
			w = append(w, "renames "+f.OldPath+" to "+f.Path)
		case "create":
			w = append(w, "creates "+f.Path+" (untracked until it is added)")
		}
	}
	return w
}

func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + fmt.Sprintf("\n… [patch truncated at %d of %d bytes]", max, len(s))
}

// ---- the patch check ------------------------------------------------------

// patchFile is one file section of a patch as warden reads it.
type patchFile struct {
	OldPath, NewPath string // workspace-relative after -p1; "" for /dev/null
	Action           string
	Start, End       int // the section's bytes in the patch
}

// gitPatch is warden's reading of a patch.
type gitPatch struct {
	Files []patchFile
	// Written is every path the patch may write (create, modify, delete,
	// both sides of a rename), sorted.
	Written []string
	// Names is every file name git may take from the patch (Written plus
	// copy sources), for the cross-check against git's own reading.
	Names map[string]bool
}

// patchSection collects one file section while parsing.
type patchSection struct {
	git                     bool
	gitOld, gitNew          string
	minus, plus             string
	sawMinus, sawPlus       bool
	renameFrom, renameTo    string
	copyFrom, copyTo        string
	newFile, deletedFile    bool
	hunks                   bool
	minusNull, plusNull     bool
	headerNames, modeChange bool
	start                   int // offset of the section's first line
}

func reject(format string, args ...any) *tool.Error {
	return tool.Errorf(tool.CodePatchRejected,
		"send a text patch that only changes regular files inside the workspace, with paths relative to its top (git diff output)",
		format, args...)
}

// parsePatch reads a patch the way git apply does — file headers
// (diff --git, ---/+++, rename/copy, mode lines) outside hunks, hunk lines
// counted from their @@ header — and refuses what warden never applies:
// paths that are absolute, contain .., or lie in .git/ or .warden/;
// symlink (120000) and submodule (160000) modes; binary patches; NUL bytes.
func parsePatch(patch string) (*gitPatch, *tool.Error) {
	if strings.IndexByte(patch, 0) >= 0 {
		return nil, reject("the patch contains a NUL byte")
	}
	pp := &patchParser{p: &gitPatch{Names: map[string]bool{}}, written: map[string]bool{}}
	offset := 0
	for n, line := range strings.Split(patch, "\n") {
		at := offset
		offset += len(line) + 1
		if pp.hunkLine(line) {
			continue
		}
		if e := pp.header(line, n+1, at); e != nil {
			return nil, e
		}
	}
	if e := pp.finish(len(patch)); e != nil {
		return nil, e
	}
	return pp.result()
}

// patchParser is parsePatch's state: what it has read of the patch, the
// file section it is collecting, and the lines left in the current hunk.
type patchParser struct {
	p       *gitPatch
	written map[string]bool
	cur     *patchSection
	// oldLeft and newLeft count the lines the open hunk still holds on
	// each side (from its @@ header).
	oldLeft, newLeft int
}

// hunkLine reports whether line is a line of the open hunk, counting it
// off. A line that cannot be one ends the hunk: git reports a corrupt
// patch, and the line is read on as a header.
func (pp *patchParser) hunkLine(line string) bool {
	if pp.oldLeft <= 0 && pp.newLeft <= 0 {
		return false
	}
	switch {
	case line == "" || line[0] == ' ':
		pp.oldLeft--
		pp.newLeft--
	case line[0] == '-':
		pp.oldLeft--
	case line[0] == '+':
		pp.newLeft--
	case line[0] == '\\':
	default:
		pp.oldLeft, pp.newLeft = 0, 0
		return false
	}
	return true
}

// header reads a line outside any hunk (line lineNo, at byte offset at).
func (pp *patchParser) header(line string, lineNo, at int) *tool.Error {
	switch {
	case strings.HasPrefix(line, "diff --git "):
		return pp.diffGit(line[len("diff --git "):], at)
	case strings.HasPrefix(line, "--- "):
		return pp.minusHeader(line[4:], at)
	case strings.HasPrefix(line, "+++ "):
		return pp.plusHeader(line[4:], at)
	case strings.HasPrefix(line, "@@ "):
		return pp.hunkHeader(line, lineNo)
	case hasAnyPrefix(line, "rename from ", "rename old ", "rename to ", "rename new ", "copy from ", "copy to "):
		return pp.renameOrCopy(line, at)
	case hasAnyPrefix(line, "new file mode ", "deleted file mode ", "old mode ", "new mode "):
		return pp.modeLine(line)
	case strings.HasPrefix(line, "index "):
		if f := strings.Fields(line); len(f) == 3 {
			return checkMode(f[2])
		}
	case strings.HasPrefix(line, "GIT binary patch"), strings.HasPrefix(line, "Binary files "),
		strings.HasPrefix(line, "literal "), strings.HasPrefix(line, "delta "):
		return reject("line %d: binary patches are not accepted (their change cannot be reviewed as text)", lineNo)
	}
	return nil
}

// diffGit starts a section at a "diff --git a/… b/…" line (names: what
// follows "diff --git ").
func (pp *patchParser) diffGit(names string, at int) *tool.Error {
	if e := pp.finish(at); e != nil {
		return e
	}
	pp.cur = &patchSection{git: true, start: at}
	a, b, ok, e := diffGitNames(names)
	if e != nil {
		return e
	}
	if ok {
		pp.cur.gitOld, pp.cur.gitNew, pp.cur.headerNames = a, b, true
	}
	return nil
}

// minusHeader reads a "--- name" line: it starts a new section unless it
// belongs to the current one (no hunk and no "---" there yet).
func (pp *patchParser) minusHeader(rest string, at int) *tool.Error {
	if pp.cur == nil || pp.cur.hunks || pp.cur.sawMinus {
		if e := pp.finish(at); e != nil {
			return e
		}
		pp.cur = &patchSection{start: at}
	}
	name, null, e := headerName(rest, true)
	if e != nil {
		return e
	}
	pp.cur.minus, pp.cur.minusNull, pp.cur.sawMinus = name, null, true
	return nil
}

// plusHeader reads a "+++ name" line.
func (pp *patchParser) plusHeader(rest string, at int) *tool.Error {
	if pp.cur == nil {
		pp.cur = &patchSection{start: at}
	}
	name, null, e := headerName(rest, true)
	if e != nil {
		return e
	}
	pp.cur.plus, pp.cur.plusNull, pp.cur.sawPlus = name, null, true
	return nil
}

// hunkHeader opens a hunk at its "@@ -a,b +c,d @@" line.
func (pp *patchParser) hunkHeader(line string, lineNo int) *tool.Error {
	o, nw, ok := hunkCounts(line)
	if !ok {
		return reject("line %d: malformed hunk header %q", lineNo, line)
	}
	if pp.cur == nil {
		return reject("line %d: a hunk before any file header", lineNo)
	}
	pp.cur.hunks = true
	pp.oldLeft, pp.newLeft = o, nw
	return nil
}

// renameOrCopy reads a "rename from/to" ("rename old/new") or "copy
// from/to" line.
func (pp *patchParser) renameOrCopy(line string, at int) *tool.Error {
	i := strings.Index(line, " ") + 1
	i += strings.Index(line[i:], " ") + 1
	name, _, e := headerName(line[i:], false)
	if e != nil {
		return e
	}
	if pp.cur == nil {
		pp.cur = &patchSection{start: at}
	}
	switch {
	case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "rename old "):
		pp.cur.renameFrom = name
	case strings.HasPrefix(line, "rename "):
		pp.cur.renameTo = name
	case strings.HasPrefix(line, "copy from "):
		pp.cur.copyFrom = name
	default:
		pp.cur.copyTo = name
	}
	return nil
}

// modeLine reads a "new file mode", "deleted file mode", "old mode" or
// "new mode" line, refusing a mode warden never applies.
func (pp *patchParser) modeLine(line string) *tool.Error {
	f := strings.Fields(line)
	if e := checkMode(f[len(f)-1]); e != nil {
		return e
	}
	if pp.cur != nil {
		pp.cur.newFile = pp.cur.newFile || strings.HasPrefix(line, "new file")
		pp.cur.deletedFile = pp.cur.deletedFile || strings.HasPrefix(line, "deleted file")
		pp.cur.modeChange = true
	}
	return nil
}

// finish closes the section being collected, which ends at byte end, and
// records the file it changes.
func (pp *patchParser) finish(end int) *tool.Error {
	if pp.cur == nil {
		return nil
	}
	f, e := pp.cur.file()
	start := pp.cur.start
	pp.cur = nil
	if e != nil {
		return e
	}
	if f == nil {
		return nil
	}
	f.Start, f.End = start, end
	pp.p.Files = append(pp.p.Files, *f)
	for _, n := range []string{f.OldPath, f.NewPath} {
		if n != "" {
			pp.p.Names[n] = true
		}
	}
	if f.NewPath != "" {
		pp.written[f.NewPath] = true
	}
	if f.OldPath != "" && (f.Action == "delete" || f.Action == "rename") {
		pp.written[f.OldPath] = true
	}
	return nil
}

// result is the patch read, once every section is finished: refused when
// it changes no file.
func (pp *patchParser) result() (*gitPatch, *tool.Error) {
	if len(pp.p.Files) == 0 {
		return nil, reject("the patch changes no file: no diff --git or ---/+++ headers were found")
	}
	for w := range pp.written {
		pp.p.Written = append(pp.p.Written, w)
	}
	sort.Strings(pp.p.Written)
	return pp.p, nil
}

// file turns a section into a file change, checking every name in it.
func (s *patchSection) file() (*patchFile, *tool.Error) {
	var f patchFile
	// A section renames or copies, never both (git refuses it as
	// inconsistent header lines; the two names must not be joined below).
	if (s.renameFrom != "" || s.renameTo != "") && (s.copyFrom != "" || s.copyTo != "") {
		return nil, reject("a section of the patch both renames and copies a file")
	}
	// Names as git takes them: rename/copy lines first, then ---/+++, then
	// the diff --git line.
	switch {
	case s.renameFrom != "" || s.copyFrom != "":
		f.OldPath = s.renameFrom + s.copyFrom
	case s.sawMinus && !s.minusNull:
		f.OldPath = s.minus
	case s.headerNames && !s.newFile:
		f.OldPath = s.gitOld
	}
	switch {
	case s.renameTo != "" || s.copyTo != "":
		f.NewPath = s.renameTo + s.copyTo
	case s.sawPlus && !s.plusNull:
		f.NewPath = s.plus
	case s.headerNames && !s.deletedFile:
		f.NewPath = s.gitNew
	}
	if s.minusNull || s.newFile {
		f.OldPath = ""
	}
	if s.plusNull || s.deletedFile {
		f.NewPath = ""
	}
	// Every name the section carries is checked, used or not.
	for _, n := range []string{s.gitOld, s.gitNew, s.minus, s.plus, s.renameFrom, s.renameTo, s.copyFrom, s.copyTo} {
		if n == "" {
			continue
		}
		if e := checkPatchPath(n); e != nil {
			return nil, e
		}
	}
	switch {
	case f.OldPath == "" && f.NewPath == "":
		if !s.hunks && !s.modeChange && !s.sawMinus && !s.sawPlus && !s.git {
			return nil, nil
		}
		return nil, reject("cannot tell which file a section of the patch changes")
	case s.renameFrom != "" || s.renameTo != "":
		if s.renameFrom == "" || s.renameTo == "" {
			return nil, reject("a rename without both 'rename from' and 'rename to'")
		}
		f.Action = "rename"
	case s.copyFrom != "" || s.copyTo != "":
		if s.copyFrom == "" || s.copyTo == "" {
			return nil, reject("a copy without both 'copy from' and 'copy to'")
		}
		f.Action = "copy"
	}
	if (f.Action == "rename" || f.Action == "copy") && (f.OldPath == "" || f.NewPath == "") {
		// git refuses it too (inconsistent file names): a rename whose
		// old side is /dev/null would write a path Written leaves out.
		return nil, reject("a %s from or to /dev/null, or of a new or deleted file", f.Action)
	}
	switch {
	case f.Action != "":
	case f.OldPath == "":
		f.Action = "create"
	case f.NewPath == "":
		f.Action = "delete"
	default:
		f.Action = "modify"
	}
	return &f, nil
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// checkMode accepts regular-file modes only.
func checkMode(m string) *tool.Error {
	v, err := strconv.ParseUint(m, 8, 32)
	if err != nil {
		return reject("malformed file mode %q", m)
	}
	switch v & 0o170000 {
	case 0o100000:
		return nil
	case 0o120000:
		return reject("symlinks are not accepted (mode %s): a patch may only change regular files", m)
	case 0o160000:
		return reject("submodules (gitlinks, mode %s) are not accepted", m)
	}
	return reject("file mode %s is not a regular file's", m)
}

// hunkCounts parses "@@ -a[,b] +c[,d] @@".
func hunkCounts(line string) (old, nw int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0, false
	}
	count := func(s string) (int, bool) {
		_, c, found := strings.Cut(s, ",")
		if !found {
			return 1, true
		}
		n, err := strconv.Atoi(c)
		return n, err == nil && n >= 0
	}
	o, ok1 := count(f[1][1:])
	n, ok2 := count(f[2][1:])
	return o, n, ok1 && ok2
}

// headerName reads a file name from a header line: C-quoted, or up to a
// tab (a timestamp follows). With strip, the first directory (a/, b/) is
// removed as git apply -p1 does, after the raw name is checked. null reports
// /dev/null.
func headerName(s string, strip bool) (name string, null bool, e *tool.Error) {
	raw := s
	if strings.HasPrefix(s, `"`) {
		var rest string
		var ok bool
		raw, rest, ok = unquote(s)
		if !ok {
			return "", false, reject("malformed quoted file name %s", s)
		}
		_ = rest
	} else if i := strings.IndexByte(s, '\t'); i >= 0 {
		raw = s[:i]
	}
	if raw == "/dev/null" {
		return "", true, nil
	}
	if e := checkRawPath(raw); e != nil {
		return "", false, e
	}
	if strip {
		if i := strings.IndexByte(raw, '/'); i >= 0 {
			raw = raw[i+1:]
		}
	}
	return raw, false, nil
}

// diffGitNames splits the names of a "diff --git a/X b/Y" line. ok is
// false when unquoted names cannot be split unambiguously (git then takes the
// names from the other headers).
func diffGitNames(s string) (a, b string, ok bool, e *tool.Error) {
	strip := func(n string) (string, *tool.Error) {
		if e := checkRawPath(n); e != nil {
			return "", e
		}
		if i := strings.IndexByte(n, '/'); i >= 0 {
			return n[i+1:], nil
		}
		return n, nil
	}
	var ra, rb string
	if strings.HasPrefix(s, `"`) {
		q, rest, qok := unquote(s)
		if !qok || !strings.HasPrefix(rest, " ") {
			return "", "", false, reject("malformed diff --git line")
		}
		ra, rest = q, rest[1:]
		if strings.HasPrefix(rest, `"`) {
			if rb, _, qok = unquote(rest); !qok {
				return "", "", false, reject("malformed diff --git line")
			}
		} else {
			rb = rest
		}
	} else if i := strings.Index(s, ` "`); i >= 0 {
		ra = s[:i]
		var qok bool
		if rb, _, qok = unquote(s[i+1:]); !qok {
			return "", "", false, reject("malformed diff --git line")
		}
	} else {
		// Unquoted: the split where both names are equal after -p1.
		for i := 0; i < len(s); i++ {
			if s[i] != ' ' {
				continue
			}
			x, y := s[:i], s[i+1:]
			xs, ys := x, y
			if j := strings.IndexByte(x, '/'); j >= 0 {
				xs = x[j+1:]
			}
			if j := strings.IndexByte(y, '/'); j >= 0 {
				ys = y[j+1:]
			}
			if xs == ys && xs != "" {
				ra, rb = x, y
				break
			}
		}
		if ra == "" {
			return "", "", false, nil
		}
	}
	if a, e = strip(ra); e != nil {
		return
	}
	if b, e = strip(rb); e != nil {
		return
	}
	return a, b, true, nil
}

// unquote decodes a C-quoted name at the start of s (as git writes names
// with unusual characters) and returns the rest after the closing quote.
func unquote(s string) (name, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", s, false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			i++
			if i >= len(s) {
				return "", "", false
			}
			switch s[i] {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case '"', '\\':
				b.WriteByte(s[i])
			case '0', '1', '2', '3':
				if i+2 >= len(s) {
					return "", "", false
				}
				v, err := strconv.ParseUint(s[i:i+3], 8, 8)
				if err != nil {
					return "", "", false
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				return "", "", false
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

// checkRawPath checks a name as it stands in the patch, before any
// prefix is stripped: not absolute, no .. element, no control characters,
// no .git element.
func checkRawPath(raw string) *tool.Error {
	if raw == "" {
		return reject("an empty file name")
	}
	if strings.HasPrefix(raw, "/") {
		return reject("absolute path %q: paths must be relative to the repository's top", raw)
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f {
			return reject("file name %q contains a control character", raw)
		}
	}
	for _, el := range strings.Split(raw, "/") {
		if el == ".." {
			return reject("path %q contains '..'", raw)
		}
		if isDotGit(el) {
			return reject("path %q is inside .git/: a patch may not change the repository's internals", raw)
		}
	}
	return nil
}

// checkPatchPath checks a name after -p1: also no empty or . element and
// nothing under .warden/ (warden's own policy).
func checkPatchPath(p string) *tool.Error {
	if e := checkRawPath(p); e != nil {
		return e
	}
	for i, el := range strings.Split(p, "/") {
		if el == "" || el == "." {
			return reject("path %q has an empty or '.' element", p)
		}
		if i == 0 && strings.EqualFold(strings.TrimRight(el, ". "), ".warden") {
			return reject("path %q is inside .warden/: a patch may not change warden's policy", p)
		}
	}
	return nil
}

// isDotGit matches .git as file systems that fold case or trailing dots
// and spaces (NTFS, HFS+) would see it, and its 8.3 short name.
func isDotGit(el string) bool {
	t := strings.TrimRight(el, ". ")
	if strings.EqualFold(t, ".git") || strings.EqualFold(t, "git~1") {
		return true
	}
	// HFS+ ignores some zero-width code points.
	t = strings.Map(func(r rune) rune {
		switch r {
		case 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0xfeff:
			return -1
		}
		return r
	}, t)
	return strings.EqualFold(t, ".git")
}

// patchTargets resolves every path the patch writes (symlinks followed)
// and refuses any that leaves the workspace. It returns the absolute paths,
// for the fs.write needs.
func patchTargets(ws string, p *gitPatch) ([]string, *tool.Error) {
	abs := make([]string, 0, len(p.Written))
	for _, rel := range p.Written {
		r, err := capability.ResolvePath(ws, rel)
		if err != nil {
			return nil, reject("path %q: %v", rel, err)
		}
		if r == ws || !strings.HasPrefix(r, ws+"/") {
			return nil, reject("path %q leaves the workspace through a symlink (to %s)", rel, r)
		}
		if inner := strings.TrimPrefix(r, ws+"/"); isDotGit(strings.SplitN(inner, "/", 2)[0]) {
			return nil, reject("path %q resolves into .git/ (%s)", rel, r)
		}
		abs = append(abs, r)
	}
	return abs, nil
}

// crossCheckPatch compares git's reading of the patch (`git apply
// --numstat --summary -z`) with warden's: every file git names must be one
// warden vetted, and no summary line may create or change to a symlink or
// submodule. It returns the line counts by path.
func crossCheckPatch(p *gitPatch, out []byte) (map[string][2]int, *tool.Error) {
	counts := map[string][2]int{}
	summary := out
	if i := bytes.LastIndexByte(out, 0); i >= 0 {
		summary = out[i+1:]
		for _, rec := range bytes.Split(out[:i], []byte{0}) {
			f := strings.SplitN(string(rec), "\t", 3)
			if len(f) != 3 {
				return nil, reject("git reads the patch differently from warden's check (unexpected %q)", rec)
			}
			if !p.Names[f[2]] {
				return nil, reject("git reads the patch as touching %q, which warden's check did not see; refusing it", f[2])
			}
			add, _ := strconv.Atoi(f[0])
			del, _ := strconv.Atoi(f[1])
			counts[f[2]] = [2]int{add, del}
		}
	}
	for _, l := range strings.Split(string(summary), "\n") {
		for _, m := range []string{"120000", "160000"} {
			if strings.Contains(l, " mode "+m+" ") || strings.Contains(l, "=> "+m+" ") || strings.Contains(l, " "+m+" =>") {
				return nil, reject("git reads the patch as creating a symlink or submodule (%s); refusing it", strings.TrimSpace(l))
			}
		}
	}
	return counts, nil
}
