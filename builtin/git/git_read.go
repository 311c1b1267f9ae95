package git

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// ---- git_status -----------------------------------------------------------

type statusTool struct{ g *runner }

func (t *statusTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "git_status",
		Description: "Status of the workspace's git repository: the branch (head, upstream, ahead/behind) and every changed, " +
			"renamed, unmerged and untracked path with its two-letter XY code (X = staged, Y = unstaged; . = unchanged).",
		Capabilities: []capability.Kind{capability.GitRead},
		ReadOnly:     true,
	}
}

type statusArgs struct {
	Ignored bool `json:"ignored,omitempty" jsonschema:"also list ignored files (default false)"`
}

func (t *statusTool) Needs(c *tool.Call, a *statusArgs) ([]capability.Need, error) {
	return readNeeds(), nil
}

// BranchStatus is the branch part of git_status's data.
type BranchStatus struct {
	OID      string `json:"oid,omitempty"` // "" before the first commit
	Head     string `json:"head"`          // branch name, or "(detached)"
	Detached bool   `json:"detached"`
	Initial  bool   `json:"initial"` // no commit yet
	Upstream string `json:"upstream,omitempty"`
	Ahead    int    `json:"ahead"`
	Behind   int    `json:"behind"`
}

// StatusEntry is one path in git_status's data.
type StatusEntry struct {
	// Kind is changed, renamed, copied, unmerged, untracked or ignored.
	Kind string `json:"kind"`
	XY   string `json:"xy,omitempty"`
	// Staged and Unstaged spell X and Y out (modified, added, deleted,
	// renamed, copied, type-changed, updated-unmerged, unmodified).
	Staged    string `json:"staged,omitempty"`
	Unstaged  string `json:"unstaged,omitempty"`
	Path      string `json:"path"`
	OrigPath  string `json:"orig_path,omitempty"`
	Score     string `json:"score,omitempty"` // R100, C75
	Submodule string `json:"submodule,omitempty"`
	ModeHead  string `json:"mode_head,omitempty"`
	ModeIndex string `json:"mode_index,omitempty"`
	ModeWork  string `json:"mode_worktree,omitempty"`
}

// Status is git_status's data.
type Status struct {
	Branch    BranchStatus  `json:"branch"`
	Entries   []StatusEntry `json:"entries"`
	Clean     bool          `json:"clean"`
	Staged    int           `json:"staged"`
	Unstaged  int           `json:"unstaged"`
	Untracked int           `json:"untracked"`
	Ignored   int           `json:"ignored"`
	Unmerged  int           `json:"unmerged"`
	Total     int           `json:"total"`
	Truncated bool          `json:"truncated"`
}

func (t *statusTool) Run(ctx context.Context, c *tool.Call, a *statusArgs) tool.Outcome {
	s, e := t.g.open(ctx, c, true)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer s.close()
	args := []string{"status", "--porcelain=v2", "--branch", "-z", "--ignore-submodules=dirty"}
	if a.Ignored {
		args = append(args, "--ignored")
	}
	out, e := s.run(nil, maxParse, args...)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if out.Code != 0 {
		return tool.Outcome{Err: s.fail(out, "status")}
	}
	st := parseStatus(out.Stdout)
	if out.Truncated {
		st.Truncated = true
	}
	var warnings []string
	if st.Truncated {
		warnings = append(warnings, fmt.Sprintf("status truncated: %d entries listed", len(st.Entries)))
	}
	return tool.Outcome{Output: statusText(st), Data: st, Warnings: warnings}
}

var xyNames = map[byte]string{
	'.': "unmodified", 'M': "modified", 'T': "type-changed", 'A': "added", 'D': "deleted",
	'R': "renamed", 'C': "copied", 'U': "updated-unmerged",
}

// parseStatus parses `git status --porcelain=v2 --branch -z`.
func parseStatus(b []byte) Status {
	st := Status{Entries: []StatusEntry{}}
	recs := bytes.Split(b, []byte{0})
	for i := 0; i < len(recs); i++ {
		r := string(recs[i])
		if r == "" {
			continue
		}
		var e StatusEntry
		switch r[0] {
		case '#':
			parseBranchHeader(&st.Branch, r)
			continue
		case '1':
			f := strings.SplitN(r, " ", 9)
			if len(f) < 9 {
				continue
			}
			e = StatusEntry{Kind: "changed", XY: f[1], Submodule: f[2], ModeHead: f[3], ModeIndex: f[4], ModeWork: f[5], Path: f[8]}
		case '2':
			f := strings.SplitN(r, " ", 10)
			if len(f) < 10 {
				continue
			}
			e = StatusEntry{Kind: "renamed", XY: f[1], Submodule: f[2], ModeHead: f[3], ModeIndex: f[4], ModeWork: f[5], Score: f[8], Path: f[9]}
			if strings.HasPrefix(f[8], "C") {
				e.Kind = "copied"
			}
			if i+1 < len(recs) {
				i++
				e.OrigPath = string(recs[i])
			}
		case 'u':
			f := strings.SplitN(r, " ", 11)
			if len(f) < 11 {
				continue
			}
			e = StatusEntry{Kind: "unmerged", XY: f[1], Submodule: f[2], ModeWork: f[6], Path: f[10]}
		case '?':
			e = StatusEntry{Kind: "untracked", Path: strings.TrimPrefix(r, "? ")}
		case '!':
			e = StatusEntry{Kind: "ignored", Path: strings.TrimPrefix(r, "! ")}
		default:
			continue
		}
		if e.Submodule == "N..." {
			e.Submodule = ""
		}
		if len(e.XY) == 2 {
			e.Staged, e.Unstaged = xyNames[e.XY[0]], xyNames[e.XY[1]]
		}
		switch e.Kind {
		case "untracked":
			st.Untracked++
		case "ignored":
			st.Ignored++
		case "unmerged":
			st.Unmerged++
		default:
			if e.XY[0] != '.' {
				st.Staged++
			}
			if e.XY[1] != '.' {
				st.Unstaged++
			}
		}
		st.Total++
		if len(st.Entries) < maxEntries {
			st.Entries = append(st.Entries, e)
		} else {
			st.Truncated = true
		}
	}
	st.Clean = st.Staged == 0 && st.Unstaged == 0 && st.Untracked == 0 && st.Unmerged == 0
	return st
}

func parseBranchHeader(b *BranchStatus, r string) {
	f := strings.SplitN(r, " ", 3)
	if len(f) < 3 {
		return
	}
	switch f[1] {
	case "branch.oid":
		if f[2] == "(initial)" {
			b.Initial = true
		} else {
			b.OID = f[2]
		}
	case "branch.head":
		b.Head = f[2]
		b.Detached = f[2] == "(detached)"
	case "branch.upstream":
		b.Upstream = f[2]
	case "branch.ab":
		for _, x := range strings.Fields(f[2]) {
			n, _ := strconv.Atoi(x[1:])
			if x[0] == '+' {
				b.Ahead = n
			} else {
				b.Behind = n
			}
		}
	}
}

// statusText renders the status like `git status --short --branch`.
func statusText(st Status) string {
	var sb strings.Builder
	b := st.Branch
	sb.WriteString("## ")
	switch {
	case b.Detached:
		sb.WriteString("HEAD (detached at " + short(b.OID) + ")")
	case b.Initial:
		sb.WriteString("No commits yet on " + b.Head)
	default:
		sb.WriteString(b.Head)
	}
	if b.Upstream != "" {
		fmt.Fprintf(&sb, "...%s", b.Upstream)
		if b.Ahead != 0 || b.Behind != 0 {
			fmt.Fprintf(&sb, " [ahead %d, behind %d]", b.Ahead, b.Behind)
		}
	}
	sb.WriteByte('\n')
	for _, e := range st.Entries {
		switch e.Kind {
		case "untracked":
			sb.WriteString("?? " + e.Path)
		case "ignored":
			sb.WriteString("!! " + e.Path)
		default:
			xy := strings.ReplaceAll(e.XY, ".", " ")
			sb.WriteString(xy + " " + e.Path)
			if e.OrigPath != "" {
				sb.WriteString(" (from " + e.OrigPath + ")")
			}
		}
		sb.WriteByte('\n')
	}
	if st.Truncated {
		fmt.Fprintf(&sb, "… [%d entries in all; %d listed]\n", st.Total, len(st.Entries))
	}
	if st.Clean {
		sb.WriteString("nothing to commit, working tree clean\n")
	}
	return sb.String()
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}

// ---- git_diff -------------------------------------------------------------

type diffTool struct{ g *runner }

func (t *diffTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "git_diff",
		Description: "Unified diff of the workspace's git repository: by default the working tree and index against HEAD " +
			"(every uncommitted change to tracked files); with rev, against that commit or for that range. Data lists the files with lines added and deleted.",
		Capabilities: []capability.Kind{capability.GitRead},
		ReadOnly:     true,
	}
}

type diffArgs struct {
	Rev   *string  `json:"rev,omitempty" minLength:"1" maxLength:"1024" jsonschema:"what to compare: a commit (the working tree against it, e.g. HEAD~1) or a range (main..feature, A...B). Default HEAD: staged and unstaged changes to tracked files"`
	Paths []string `json:"paths,omitempty" maxItems:"256" items.minLength:"1" items.maxLength:"4096" jsonschema:"limit the diff to these paths (files or directories, relative to the workspace; taken literally, no globs)"`
}

// check validates the arguments and returns the workspace-relative paths.
func (a *diffArgs) check(ws string) ([]string, *tool.Error) {
	if a.Rev != nil {
		if e := checkRev("rev", *a.Rev); e != nil {
			return nil, e
		}
	}
	rels := make([]string, 0, len(a.Paths))
	for _, p := range a.Paths {
		rel, e := workspacePath(ws, p)
		if e != nil {
			return nil, e
		}
		rels = append(rels, rel)
	}
	return rels, nil
}

// Needs: git.read covers every repository read, the paths included (a diff
// without paths shows every tracked file anyway). Paths outside the
// workspace are refused here, before git starts.
func (t *diffTool) Needs(c *tool.Call, a *diffArgs) ([]capability.Need, error) {
	if _, e := a.check(c.Workspace); e != nil {
		return nil, e
	}
	return readNeeds(), nil
}

// FileStat is one file of a diff or patch.
type FileStat struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"`
	// Status is git's letter: A added, M modified, D deleted, R renamed,
	// C copied, T type changed, U unmerged.
	Status  string `json:"status,omitempty"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary"`
}

// Diff is git_diff's data.
type Diff struct {
	Rev       string     `json:"rev"`
	Paths     []string   `json:"paths"`
	Files     []FileStat `json:"files"`
	Added     int        `json:"added"`
	Deleted   int        `json:"deleted"`
	Truncated bool       `json:"truncated"`
	Argv      []string   `json:"argv"`
}

// patchFlags make git's patch output plain, re-appliable and free of
// external programs.
var patchFlags = []string{"--no-color", "--no-ext-diff", "--no-textconv", "--submodule=short",
	"--ignore-submodules=dirty", "--src-prefix=a/", "--dst-prefix=b/", "-M"}

func (t *diffTool) Run(ctx context.Context, c *tool.Call, a *diffArgs) tool.Outcome {
	rels, e := a.check(c.Workspace)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	s, e := t.g.open(ctx, c, true)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer s.close()
	rev := "HEAD"
	if a.Rev != nil {
		rev = *a.Rev
	} else if unborn, e := s.unborn(); e != nil {
		return tool.Outcome{Err: e}
	} else if unborn {
		// No commit yet: everything tracked is new.
		if rev, e = s.emptyTree(); e != nil {
			return tool.Outcome{Err: e}
		}
	}
	args := append([]string{"diff"}, patchFlags...)
	args = append(args, "-z", "--raw", "--numstat", "-p", "--end-of-options", rev, "--")
	args = append(args, rels...)
	max := t.g.o.MaxOutput + maxParse/4
	out, e := s.run(nil, max, args...)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if out.Code != 0 {
		return tool.Outcome{Err: s.fail(out, "diff")}
	}
	files, patch, complete := parseRawNumstat(out.Stdout)
	var hiddenN int
	if visible, n := gitVisible(c, files); n > 0 {
		// Files the policy hides: the diff again, of the others only.
		hiddenN = n
		files, patch, complete = nil, nil, true
		if len(visible) > 0 {
			args = append(args[:len(args)-len(rels)], visible...)
			if out, e = s.run(nil, max, args...); e != nil {
				return tool.Outcome{Err: e}
			}
			if out.Code != 0 {
				return tool.Outcome{Err: s.fail(out, "diff")}
			}
			files, patch, complete = parseRawNumstat(out.Stdout)
		}
	}
	d := Diff{Rev: rev, Paths: rels, Files: files, Argv: gitArgv(args...)}
	if a.Rev == nil {
		d.Rev = "HEAD"
	}
	for _, f := range files {
		d.Added += f.Added
		d.Deleted += f.Deleted
	}
	text := patch
	truncated := out.Truncated || !complete
	if len(text) > t.g.o.MaxOutput {
		text, truncated = text[:t.g.o.MaxOutput], true
	}
	d.Truncated = truncated
	if len(d.Files) > maxEntries {
		d.Files, d.Truncated = d.Files[:maxEntries], true
	}
	o := tool.Outcome{Data: d}
	if hiddenN > 0 {
		o.Warnings = append(o.Warnings, hiddenWarning(hiddenN))
	}
	if len(files) == 0 && !truncated {
		o.Output = "no differences"
		return o
	}
	o.Output = textOut(text, truncated, t.g.o.MaxOutput)
	o.Origins = diffOrigins(c.Workspace, o.Output)
	if truncated {
		o.Warnings = append(o.Warnings, "diff truncated: narrow it with paths")
	}
	return o
}

// parseRawNumstat parses `git diff -z --raw --numstat [-p]` output: raw
// records, numstat records, then (with -p) an empty record and the patch
// text. Numstat decides which files changed: without index refresh, raw
// also lists files whose stat data alone changed, and numstat leaves those
// out. complete is false when the output was cut inside the records.
func parseRawNumstat(b []byte) (files []FileStat, patch []byte, complete bool) {
	files = []FileStat{}
	next := func() (string, bool) {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return "", false
		}
		s := string(b[:i])
		b = b[i+1:]
		return s, true
	}
	// Raw records: ":mode mode oid oid STATUS\0path\0[path\0]".
	status := map[string]string{}
	for len(b) > 0 && b[0] == ':' {
		hdr, ok := next()
		if !ok {
			return files, nil, false
		}
		st := ""
		if f := strings.Fields(hdr); len(f) >= 5 {
			st = f[4][:1]
		}
		p, ok := next()
		if !ok {
			return files, nil, false
		}
		if st == "R" || st == "C" {
			if p, ok = next(); !ok {
				return files, nil, false
			}
		}
		status[p] = st
	}
	// Numstat records: "added\tdeleted\tpath\0" or, for a rename or copy,
	// "added\tdeleted\t\0old\0new\0".
	for len(b) > 0 && b[0] != 0 && !bytes.HasPrefix(b, []byte("diff --git ")) {
		rec, ok := next()
		if !ok {
			return files, nil, false
		}
		f := strings.SplitN(rec, "\t", 3)
		if len(f) < 3 {
			return files, nil, false
		}
		var fs FileStat
		if f[0] == "-" {
			fs.Binary = true
		} else {
			fs.Added, _ = strconv.Atoi(f[0])
			fs.Deleted, _ = strconv.Atoi(f[1])
		}
		fs.Path = f[2]
		if f[2] == "" {
			if fs.OldPath, ok = next(); !ok {
				return files, nil, false
			}
			if fs.Path, ok = next(); !ok {
				return files, nil, false
			}
		}
		fs.Status = status[fs.Path]
		files = append(files, fs)
	}
	if len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	return files, b, true
}

// ---- git_show -------------------------------------------------------------

type showTool struct{ g *runner }

func (t *showTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "git_show",
		Description: "Show one object of the workspace's git repository: a commit (its message and patch), a tag, a tree (its listing) " +
			"or a file's content at a commit (ref HEAD:path).",
		Capabilities: []capability.Kind{capability.GitRead},
		ReadOnly:     true,
	}
}

type showArgs struct {
	Ref string `json:"ref" minLength:"1" maxLength:"1024" jsonschema:"the object to show: a commit, branch or tag (HEAD, main, v1.0, a1b2c3d), or a file at a commit (HEAD:path/to/file)"`
}

func (t *showTool) Needs(c *tool.Call, a *showArgs) ([]capability.Need, error) {
	if e := checkRev("ref", a.Ref); e != nil {
		return nil, e
	}
	return readNeeds(), nil
}

// Show is git_show's data.
type Show struct {
	Ref  string `json:"ref"`
	OID  string `json:"oid"`
	Type string `json:"type"` // commit, tag, tree, blob
	// Commit fields (type commit).
	Parents     []string `json:"parents,omitempty"`
	Author      string   `json:"author,omitempty"`
	AuthorDate  string   `json:"author_date,omitempty"`
	Committer   string   `json:"committer,omitempty"`
	CommitDate  string   `json:"commit_date,omitempty"`
	Subject     string   `json:"subject,omitempty"`
	Size        int      `json:"size,omitempty"` // blob bytes
	Binary      bool     `json:"binary,omitempty"`
	Truncated   bool     `json:"truncated"`
	ContentNote string   `json:"content_note,omitempty"`
}

func (t *showTool) Run(ctx context.Context, c *tool.Call, a *showArgs) tool.Outcome {
	if e := checkRev("ref", a.Ref); e != nil {
		return tool.Outcome{Err: e}
	}
	s, e := t.g.open(ctx, c, true)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer s.close()
	// The name goes on stdin: cat-file never reads it as an option.
	out, e := s.run(strings.NewReader(a.Ref+"\n"), 4096, "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if out.Code != 0 {
		return tool.Outcome{Err: s.fail(out, "cat-file")}
	}
	// "<oid> <type> <size>", or "<name> missing" / "<name> ambiguous".
	f := strings.Fields(strings.TrimSpace(string(out.Stdout)))
	if len(f) != 3 || !isHex(f[0]) || strings.HasSuffix(strings.TrimSpace(string(out.Stdout)), " missing") {
		return tool.Fail(tool.CodeNotFound, "list branches with git_branches, or use a commit id (HEAD:path for a file)",
			"no object named %q in the repository", a.Ref)
	}
	sh := Show{Ref: a.Ref, OID: f[0], Type: f[1]}
	sh.Size, _ = strconv.Atoi(f[2])
	if sh.Type == "commit" {
		meta, e := s.run(nil, 64<<10, "show", "-s", "--no-color", "--format=%P%x00%an <%ae>%x00%aI%x00%cn <%ce>%x00%cI%x00%s", "--end-of-options", sh.OID, "--")
		if e != nil {
			return tool.Outcome{Err: e}
		}
		if meta.Code != 0 {
			return tool.Outcome{Err: s.fail(meta, "show")}
		}
		m := strings.SplitN(strings.TrimRight(string(meta.Stdout), "\n"), "\x00", 6)
		if len(m) == 6 {
			sh.Parents = strings.Fields(m[0])
			sh.Author, sh.AuthorDate, sh.Committer, sh.CommitDate, sh.Subject = m[1], m[2], m[3], m[4], m[5]
		}
	}
	if _, path, ok := strings.Cut(a.Ref, ":"); ok && path != "" {
		// A file at a commit, by its path: the policy's hide: list
		// applies to it as to the working tree's.
		if entry, hidden := c.Hidden(filepath.Join(c.Workspace, filepath.FromSlash(path))); hidden {
			return tool.Outcome{Err: gate.HiddenError(path, entry)}
		}
	}
	args := append([]string{"show"}, patchFlags...)
	args = append(args, "--no-notes", "--end-of-options", sh.OID, "--")
	var hiddenN int
	if sh.Type == "commit" && !c.Hide.Empty() {
		// The commit's patch leaves out the files the policy hides.
		stat, e := s.run(nil, maxParse, "show", "--no-color", "--no-renames", "--format=", "-z", "--raw", "--numstat", "--no-notes", "--end-of-options", sh.OID, "--")
		if e != nil {
			return tool.Outcome{Err: e}
		}
		files, _, _ := parseRawNumstat(stat.Stdout)
		visible, n := gitVisible(c, files)
		if hiddenN = n; n > 0 {
			if len(visible) == 0 {
				// Nothing left to show but the message.
				args = append(append([]string{"show"}, patchFlags...), "-s", "--no-notes", "--end-of-options", sh.OID, "--")
			} else {
				args = append(args, visible...)
			}
		}
	}
	body, e := s.run(nil, t.g.o.MaxOutput, args...)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if body.Code != 0 {
		return tool.Outcome{Err: s.fail(body, "show")}
	}
	sh.Truncated = body.Truncated
	o := tool.Outcome{Data: &sh}
	if sh.Type == "blob" && (bytes.IndexByte(body.Stdout, 0) >= 0 || !utf8ValidPrefix(body.Stdout, body.Truncated)) {
		sh.Binary = true
		sh.ContentNote = "binary content not shown"
		o.Output = fmt.Sprintf("%s: binary blob %s, %d bytes (not shown)", a.Ref, sh.OID, sh.Size)
		return o
	}
	o.Output = textOut(body.Stdout, body.Truncated, t.g.o.MaxOutput)
	o.Origins = showOrigins(c.Workspace, a.Ref, sh.Type, o.Output)
	if body.Truncated {
		o.Warnings = append(o.Warnings, "output truncated")
	}
	if hiddenN > 0 {
		o.Warnings = append(o.Warnings, hiddenWarning(hiddenN))
	}
	return o
}

// gitVisible splits a diff's files into the paths the policy's hide: list
// leaves visible (both names of a rename) and the number it hides.
func gitVisible(c *tool.Call, files []FileStat) (visible []string, hidden int) {
	if c.Hide.Empty() {
		return nil, 0
	}
	for _, f := range files {
		hide := false
		for _, p := range []string{f.Path, f.OldPath} {
			if p == "" {
				continue
			}
			if _, h := c.Hidden(filepath.Join(c.Workspace, filepath.FromSlash(p))); h {
				hide = true
			}
		}
		if hide {
			hidden++
			continue
		}
		visible = append(visible, f.Path)
		if f.OldPath != "" {
			visible = append(visible, f.OldPath)
		}
	}
	return visible, hidden
}

func hiddenWarning(n int) string {
	return fmt.Sprintf("%d file(s) the policy hides (hide:) left out", n)
}

func isHex(s string) bool {
	if len(s) < 40 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// utf8ValidPrefix reports whether b is valid UTF-8, allowing a rune cut at
// the end when b was truncated.
func utf8ValidPrefix(b []byte, truncated bool) bool {
	if truncated && len(b) > 4 {
		b = b[:len(b)-4]
	}
	return strings.ToValidUTF8(string(b), "") == string(b)
}

// ---- git_branches ---------------------------------------------------------

type branchesTool struct{ g *runner }

func (t *branchesTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "git_branches",
		Description: "List the branches of the workspace's git repository with their commit, upstream and ahead/behind counts, " +
			"and which one is checked out. all: include remote-tracking branches.",
		Capabilities: []capability.Kind{capability.GitRead},
		ReadOnly:     true,
	}
}

type branchesArgs struct {
	All bool `json:"all,omitempty" jsonschema:"also list remote-tracking branches (default false: local branches only)"`
}

func (t *branchesTool) Needs(c *tool.Call, a *branchesArgs) ([]capability.Need, error) {
	return readNeeds(), nil
}

// Branch is one branch in git_branches's data.
type Branch struct {
	Name     string `json:"name"`
	Ref      string `json:"ref"`
	Commit   string `json:"commit"`
	Current  bool   `json:"current"`
	Remote   bool   `json:"remote"`
	Upstream string `json:"upstream,omitempty"`
	Ahead    int    `json:"ahead"`
	Behind   int    `json:"behind"`
	Gone     bool   `json:"upstream_gone,omitempty"`
	Subject  string `json:"subject"`
}

// Branches is git_branches's data.
type Branches struct {
	Current   string   `json:"current"` // "" when detached
	Detached  bool     `json:"detached"`
	Branches  []Branch `json:"branches"`
	Truncated bool     `json:"truncated"`
}

func (t *branchesTool) Run(ctx context.Context, c *tool.Call, a *branchesArgs) tool.Outcome {
	s, e := t.g.open(ctx, c, true)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer s.close()
	head, e := s.run(nil, 4096, "symbolic-ref", "--quiet", "HEAD")
	if e != nil {
		return tool.Outcome{Err: e}
	}
	res := Branches{Branches: []Branch{}}
	switch head.Code {
	case 0:
		res.Current = strings.TrimPrefix(strings.TrimSpace(string(head.Stdout)), "refs/heads/")
	case 1:
		res.Detached = true
	default:
		return tool.Outcome{Err: s.fail(head, "symbolic-ref")}
	}
	args := []string{"for-each-ref",
		"--format=%(refname)%00%(refname:short)%00%(objectname)%00%(HEAD)%00%(upstream:short)%00%(upstream:track,nobracket)%00%(contents:subject)",
		"refs/heads/"}
	if a.All {
		args = append(args, "refs/remotes/")
	}
	out, e := s.run(nil, maxParse, args...)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if out.Code != 0 {
		return tool.Outcome{Err: s.fail(out, "for-each-ref")}
	}
	res.Truncated = out.Truncated
	for _, line := range strings.Split(string(out.Stdout), "\n") {
		f := strings.Split(line, "\x00")
		if len(f) != 7 {
			continue
		}
		br := Branch{Ref: f[0], Name: f[1], Commit: f[2], Current: f[3] == "*", Upstream: f[4], Subject: f[6],
			Remote: strings.HasPrefix(f[0], "refs/remotes/")}
		if br.Remote && strings.HasSuffix(f[0], "/HEAD") {
			continue // origin/HEAD is an alias, not a branch
		}
		for _, part := range strings.Split(f[5], ", ") {
			switch {
			case part == "gone":
				br.Gone = true
			case strings.HasPrefix(part, "ahead "):
				br.Ahead, _ = strconv.Atoi(strings.TrimPrefix(part, "ahead "))
			case strings.HasPrefix(part, "behind "):
				br.Behind, _ = strconv.Atoi(strings.TrimPrefix(part, "behind "))
			}
		}
		if len(res.Branches) >= maxEntries {
			res.Truncated = true
			break
		}
		res.Branches = append(res.Branches, br)
	}
	var sb strings.Builder
	if res.Detached {
		sb.WriteString("HEAD is detached\n")
	}
	for _, b := range res.Branches {
		mark := "  "
		if b.Current {
			mark = "* "
		}
		fmt.Fprintf(&sb, "%s%s %s", mark, b.Name, short(b.Commit))
		if b.Upstream != "" {
			fmt.Fprintf(&sb, " [%s", b.Upstream)
			switch {
			case b.Gone:
				sb.WriteString(": gone")
			case b.Ahead != 0 || b.Behind != 0:
				fmt.Fprintf(&sb, ": ahead %d, behind %d", b.Ahead, b.Behind)
			}
			sb.WriteString("]")
		}
		fmt.Fprintf(&sb, " %s\n", b.Subject)
	}
	if len(res.Branches) == 0 {
		sb.WriteString("no branches yet (no commit)\n")
	}
	return tool.Outcome{Output: sb.String(), Data: res}
}
