package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// fsSafeFS is an io/fs view of an os.Root that never blocks: files are
// opened with O_NONBLOCK and directories with O_DIRECTORY, so a FIFO met
// while walking or globbing is never waited on.
type fsSafeFS struct{ r *os.Root }

func (s fsSafeFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := s.r.OpenFile(name, os.O_RDONLY|oNonblock|oNoctty, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (s fsSafeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	f, err := s.r.OpenFile(name, os.O_RDONLY|oDirectory|oNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

func (s fsSafeFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return s.r.Stat(name)
}

// ---------------------------------------------------------------------------
// fs_list

type fsListTool struct{}

type fsListArgs struct {
	Path string `json:"path"`
}

// FSListData is fs_list's data.
type FSListData struct {
	Path         string        `json:"path"`
	ResolvedPath string        `json:"resolved_path"`
	Entries      []FSListEntry `json:"entries"`
	Count        int           `json:"count"`
	Truncated    bool          `json:"truncated"`
}

// FSListEntry is one directory entry.
type FSListEntry struct {
	Name string `json:"name"`
	Type string `json:"type"` // file, dir, symlink, fifo, socket, device, other
	Size int64  `json:"size"` // bytes, for files
}

func (fsListTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_list",
		Description: "List a directory: each entry's name, type (file, dir, symlink, fifo, socket, device, other) and size. " +
			"The output has one name per line, directories ending in / and symlinks in @. At most 10,000 entries (then truncated: true). " +
			"Needs fs.read on the directory.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": ` + fsPathSchema(`the directory to list ("." for the workspace): `+fsPathDesc) + `
  },
  "required": ["path"],
  "additionalProperties": false
}`),
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

func (fsListTool) Needs(c *tool.Call) ([]capability.Need, error) {
	var a fsListArgs
	if err := c.Bind(&a); err != nil {
		return nil, err
	}
	abs, e := fsResolve(c.Workspace, a.Path)
	if e != nil {
		return nil, e
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: abs}}, nil
}

func (t fsListTool) Preview(ctx context.Context, c *tool.Call) tool.Outcome {
	return t.Run(ctx, c)
}

func (fsListTool) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	var a fsListArgs
	if err := c.Bind(&a); err != nil {
		return tool.Outcome{Err: tool.AsError(err)}
	}
	abs, e := fsRecheck(c, capability.FSRead, a.Path, false)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	loc, e := fsLocate(c, capability.FSRead, abs)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer loc.close()
	f, err := loc.root.OpenFile(loc.rel, os.O_RDONLY|oDirectory|oNonblock, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			if fi, serr := loc.root.Lstat(loc.rel); serr == nil && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
				return tool.Fail(tool.CodeInvalidInput, "read a file with fs_read", "%s is a %s, not a directory", fsQuote(a.Path), fsTypeName(fi.Mode()))
			}
		}
		return tool.Outcome{Err: fsErr(a.Path, err)}
	}
	defer f.Close()
	if e := fsVerify(c, capability.FSRead, f, "", a.Path); e != nil {
		return tool.Outcome{Err: e}
	}
	ents, err := f.ReadDir(fsMaxListEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return tool.Outcome{Err: fsErr(a.Path, err)}
	}
	d := FSListData{Path: a.Path, ResolvedPath: abs, Entries: []FSListEntry{}}
	var warnings []string
	if len(ents) > fsMaxListEntries {
		ents = ents[:fsMaxListEntries]
		d.Truncated = true
		warnings = append(warnings, fmt.Sprintf("the listing is cut at %d entries; narrow it with fs_glob", fsMaxListEntries))
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var out strings.Builder
	for _, ent := range ents {
		le := FSListEntry{Name: ent.Name(), Type: fsTypeName(ent.Type())}
		if ent.Type().IsRegular() {
			if info, err := ent.Info(); err == nil {
				le.Size = info.Size()
			}
		}
		d.Entries = append(d.Entries, le)
		out.WriteString(le.Name)
		switch le.Type {
		case "dir":
			out.WriteByte('/')
		case "symlink":
			out.WriteByte('@')
		}
		out.WriteByte('\n')
	}
	d.Count = len(d.Entries)
	return tool.Outcome{Output: out.String(), Data: d, Warnings: warnings}
}

// ---------------------------------------------------------------------------
// fs_glob

type fsGlobTool struct{}

type fsGlobArgs struct {
	Pattern string `json:"pattern"`
}

// FSGlobData is fs_glob's data.
type FSGlobData struct {
	Pattern   string   `json:"pattern"`
	Matches   []string `json:"matches"`
	Count     int      `json:"count"`
	Truncated bool     `json:"truncated"`
	// OmittedByGrants counts matches left out because the grants do not
	// allow reading them (a symlink out of the tree, a narrower grant).
	OmittedByGrants int `json:"omitted_by_grants"`
}

func (fsGlobTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_glob",
		Description: "Find files and directories matching a glob pattern: * and ? within a name, ** across directories, [abc], {a,b}. " +
			"Relative patterns are matched under the workspace (src/**/*.go), absolute ones under a granted tree. Symlinked directories are " +
			"not descended into. Matches are returned as paths in the pattern's form; those the grants do not allow reading are left out " +
			"(counted in omitted_by_grants). At most 1,000 matches (then truncated: true). Needs fs.read on the pattern's base directory " +
			"(the part before the first wildcard).",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "maxLength": 4096,
      "description": "a doublestar glob, relative to the workspace or absolute; '..' only before the first wildcard"}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

// fsGlobSplit validates a pattern and splits it into its literal base (as
// written) and the glob below it, and resolves the base.
func fsGlobSplit(ws, pattern string) (base, rest, abs string, e *tool.Error) {
	if e := fsCheckPath(pattern); e != nil {
		return "", "", "", e
	}
	if !doublestar.ValidatePattern(pattern) {
		return "", "", "", tool.Errorf(tool.CodeInvalidInput, "check the brackets and braces: * ? ** [abc] {a,b}, \\ escapes", "%s is not a valid glob pattern", fsQuote(pattern))
	}
	base, rest = doublestar.SplitPattern(pattern)
	for _, el := range strings.Split(rest, "/") {
		if el == "" || el == "." || el == ".." {
			return "", "", "", tool.Errorf(tool.CodeInvalidInput, "put '..' only before the first wildcard, and no empty or '.' elements after it",
				"the pattern %s has %q after its first wildcard", fsQuote(pattern), el)
		}
	}
	abs, e = fsResolve(ws, base)
	return base, rest, abs, e
}

// Needs: fs.read on the pattern's base directory; the matches are filtered
// with the grants as they are found.
func (fsGlobTool) Needs(c *tool.Call) ([]capability.Need, error) {
	var a fsGlobArgs
	if err := c.Bind(&a); err != nil {
		return nil, err
	}
	_, _, abs, e := fsGlobSplit(c.Workspace, a.Pattern)
	if e != nil {
		return nil, e
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: abs}}, nil
}

func (t fsGlobTool) Preview(ctx context.Context, c *tool.Call) tool.Outcome {
	return t.Run(ctx, c)
}

var fsErrGlobFull = errors.New("fs_glob: enough matches")

func (fsGlobTool) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	var a fsGlobArgs
	if err := c.Bind(&a); err != nil {
		return tool.Outcome{Err: tool.AsError(err)}
	}
	base, rest, abs, e := fsGlobSplit(c.Workspace, a.Pattern)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: abs}) {
		return tool.Outcome{Err: fsChanged(base, abs)}
	}
	d := FSGlobData{Pattern: a.Pattern, Matches: []string{}}
	loc, e := fsLocate(c, capability.FSRead, abs)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer loc.close()
	sub, err := fsSubRoot(loc.root, loc.rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return tool.Outcome{Output: "", Data: d} // nothing matches under a missing base, or a file
	} else if err != nil {
		return tool.Outcome{Err: fsErr(base, err)}
	}
	defer sub.Close()
	realBase := abs
	if top, err := sub.Open("."); err == nil {
		e := fsVerify(c, capability.FSRead, top, "", base)
		if rp, rerr := fdRealPath(top); rerr == nil && rp != "" {
			realBase = rp
		}
		top.Close()
		if e != nil {
			return tool.Outcome{Err: e}
		}
	} else {
		return tool.Outcome{Err: fsErr(base, err)}
	}
	var out strings.Builder
	err = doublestar.GlobWalk(fsSafeFS{sub}, rest, func(p string, _ fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil // the base itself, which ** also matches
		}
		target, err := fsResolvePath(c.Workspace, filepath.Join(realBase, filepath.FromSlash(p)))
		if err != nil || !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: target}) {
			d.OmittedByGrants++
			return nil
		}
		if len(d.Matches) == fsMaxGlobResults {
			d.Truncated = true
			return fsErrGlobFull
		}
		m := p
		if base != "." {
			m = path.Join(base, p)
		}
		d.Matches = append(d.Matches, m)
		out.WriteString(m + "\n")
		return nil
	}, doublestar.WithNoFollow())
	switch {
	case err == nil, errors.Is(err, fsErrGlobFull):
	case ctx.Err() != nil:
		return tool.Fail(tool.CodeTimeout, "narrow the pattern", "fs_glob was cancelled after %d matches", len(d.Matches))
	default:
		return tool.Outcome{Err: fsErr(base, err)}
	}
	d.Count = len(d.Matches)
	var warnings []string
	if d.Truncated {
		warnings = append(warnings, fmt.Sprintf("only the first %d matches are listed (truncated); narrow the pattern", fsMaxGlobResults))
	}
	return tool.Outcome{Output: out.String(), Data: d, Warnings: warnings}
}
