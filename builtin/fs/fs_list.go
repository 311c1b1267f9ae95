package fs

import (
	"context"
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
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/builtin/internal/fspath"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// safeFS is an io/fs view of an os.Root that never blocks: files are
// opened with O_NONBLOCK and directories with O_DIRECTORY, so a FIFO met
// while walking or globbing is never waited on.
type safeFS struct{ r *os.Root }

func (s safeFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := s.r.OpenFile(name, os.O_RDONLY|fspath.ONonblock|fspath.ONoctty, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (s safeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	f, err := s.r.OpenFile(name, os.O_RDONLY|fspath.ODirectory|fspath.ONonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

func (s safeFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return s.r.Stat(name)
}

// ---------------------------------------------------------------------------
// fs_list

type listTool struct{}

type listArgs struct {
	Path string `json:"path" minLength:"1" maxLength:"4096"`
}

func (listTool) RefineSchema(s *jsonschema.Schema) {
	describePath(s.Properties["path"], `the directory to list ("." for the workspace)`)
}

// ListData is fs_list's data.
type ListData struct {
	Path         string      `json:"path"`
	ResolvedPath string      `json:"resolved_path"`
	Entries      []ListEntry `json:"entries"`
	Count        int         `json:"count"`
	Truncated    bool        `json:"truncated"`
}

// ListEntry is one directory entry.
type ListEntry struct {
	Name string `json:"name"`
	Type string `json:"type"` // file, dir, symlink, fifo, socket, device, other
	Size int64  `json:"size"` // bytes, for files
}

func (listTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_list",
		Description: "List a directory: each entry's name, type (file, dir, symlink, fifo, socket, device, other) and size. " +
			"The output has one name per line, directories ending in / and symlinks in @. At most 10,000 entries (then truncated: true). " +
			"Needs fs.read on the directory.",
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

func (listTool) Needs(c *tool.Call, a *listArgs) ([]capability.Need, error) {
	abs, e := fspath.Resolve(c.Workspace, a.Path)
	if e != nil {
		return nil, e
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: abs}}, nil
}

func (listTool) Run(ctx context.Context, c *tool.Call, a *listArgs) tool.Outcome {
	abs, e := fsRecheck(c, capability.FSRead, a.Path, false)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	loc, e := locate(c, capability.FSRead, abs)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer loc.close()
	f, err := loc.root.OpenFile(loc.rel, os.O_RDONLY|fspath.ODirectory|fspath.ONonblock, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			if fi, serr := loc.root.Lstat(loc.rel); serr == nil && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
				return tool.Fail(tool.CodeInvalidInput, "read a file with fs_read", "%s is a %s, not a directory", fspath.Quote(a.Path), typeName(fi.Mode()))
			}
		}
		return tool.Outcome{Err: fspath.Err(a.Path, err)}
	}
	defer f.Close()
	if e := verify(c, capability.FSRead, f, "", a.Path); e != nil {
		return tool.Outcome{Err: e}
	}
	ents, err := f.ReadDir(maxListEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return tool.Outcome{Err: fspath.Err(a.Path, err)}
	}
	d := ListData{Path: a.Path, ResolvedPath: abs, Entries: []ListEntry{}}
	var warnings []string
	if len(ents) > maxListEntries {
		ents = ents[:maxListEntries]
		d.Truncated = true
		warnings = append(warnings, fmt.Sprintf("the listing is cut at %d entries; narrow it with fs_glob", maxListEntries))
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var out strings.Builder
	for _, ent := range ents {
		le := ListEntry{Name: ent.Name(), Type: typeName(ent.Type())}
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

type globTool struct{}

type globArgs struct {
	Pattern string `json:"pattern" minLength:"1" maxLength:"4096" jsonschema:"a doublestar glob, relative to the workspace or absolute; '..' only before the first wildcard"`
}

// GlobData is fs_glob's data.
type GlobData struct {
	Pattern   string   `json:"pattern"`
	Matches   []string `json:"matches"`
	Count     int      `json:"count"`
	Truncated bool     `json:"truncated"`
	// OmittedByGrants counts matches left out because the grants do not
	// allow reading them (a symlink out of the tree, a narrower grant).
	OmittedByGrants int `json:"omitted_by_grants"`
}

func (globTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_glob",
		Description: "Find files and directories matching a glob pattern: * and ? within a name, ** across directories, [abc], {a,b}. " +
			"Relative patterns are matched under the workspace (src/**/*.go), absolute ones under a granted tree. Symlinked directories are " +
			"not descended into. Matches are returned as paths in the pattern's form; those the grants do not allow reading are left out " +
			"(counted in omitted_by_grants). At most 1,000 matches (then truncated: true). Needs fs.read on the pattern's base directory " +
			"(the part before the first wildcard).",
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

// globSplit validates a pattern and splits it into its literal base (as
// written) and the glob below it, and resolves the base.
func globSplit(ws, pattern string) (base, rest, abs string, e *tool.Error) {
	if e := fspath.CheckPath(pattern); e != nil {
		return "", "", "", e
	}
	if !doublestar.ValidatePattern(pattern) {
		return "", "", "", tool.Errorf(tool.CodeInvalidInput, "check the brackets and braces: * ? ** [abc] {a,b}, \\ escapes", "%s is not a valid glob pattern", fspath.Quote(pattern))
	}
	base, rest = doublestar.SplitPattern(pattern)
	for _, el := range strings.Split(rest, "/") {
		if el == "" || el == "." || el == ".." {
			return "", "", "", tool.Errorf(tool.CodeInvalidInput, "put '..' only before the first wildcard, and no empty or '.' elements after it",
				"the pattern %s has %q after its first wildcard", fspath.Quote(pattern), el)
		}
	}
	abs, e = fspath.Resolve(ws, base)
	return base, rest, abs, e
}

// Needs: fs.read on the pattern's base directory; the matches are filtered
// with the grants as they are found.
func (globTool) Needs(c *tool.Call, a *globArgs) ([]capability.Need, error) {
	_, _, abs, e := globSplit(c.Workspace, a.Pattern)
	if e != nil {
		return nil, e
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: abs}}, nil
}

var errGlobFull = errors.New("fs_glob: enough matches")

func (globTool) Run(ctx context.Context, c *tool.Call, a *globArgs) tool.Outcome {
	base, rest, abs, e := globSplit(c.Workspace, a.Pattern)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: abs}) {
		return tool.Outcome{Err: changed(base, abs)}
	}
	d := GlobData{Pattern: a.Pattern, Matches: []string{}}
	loc, e := locate(c, capability.FSRead, abs)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer loc.close()
	sub, err := subRoot(loc.root, loc.rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return tool.Outcome{Output: "", Data: d} // nothing matches under a missing base, or a file
	} else if err != nil {
		return tool.Outcome{Err: fspath.Err(base, err)}
	}
	defer sub.Close()
	realBase := abs
	if top, err := sub.Open("."); err == nil {
		e := verify(c, capability.FSRead, top, "", base)
		if rp, rerr := fspath.RealPath(top); rerr == nil && rp != "" {
			realBase = rp
		}
		top.Close()
		if e != nil {
			return tool.Outcome{Err: e}
		}
	} else {
		return tool.Outcome{Err: fspath.Err(base, err)}
	}
	var out strings.Builder
	err = doublestar.GlobWalk(safeFS{sub}, rest, func(p string, _ fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil // the base itself, which ** also matches
		}
		target, err := fspath.ResolvePath(c.Workspace, filepath.Join(realBase, filepath.FromSlash(p)))
		if err != nil || !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: target}) {
			d.OmittedByGrants++
			return nil
		}
		if len(d.Matches) == maxGlobResults {
			d.Truncated = true
			return errGlobFull
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
	case err == nil, errors.Is(err, errGlobFull):
	case ctx.Err() != nil:
		return tool.Fail(tool.CodeTimeout, "narrow the pattern", "fs_glob was cancelled after %d matches", len(d.Matches))
	default:
		return tool.Outcome{Err: fspath.Err(base, err)}
	}
	d.Count = len(d.Matches)
	var warnings []string
	if d.Truncated {
		warnings = append(warnings, fmt.Sprintf("only the first %d matches are listed (truncated); narrow the pattern", maxGlobResults))
	}
	return tool.Outcome{Output: out.String(), Data: d, Warnings: warnings}
}
