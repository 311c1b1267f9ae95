package fs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/builtin/internal/fspath"
	"github.com/wardenrt/warden/internal/unidiff"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// ---------------------------------------------------------------------------
// fs_write

type writeTool struct{}

type writeArgs struct {
	Path      string `json:"path" minLength:"1" maxLength:"4096"`
	Content   string `json:"content" jsonschema:"the content to write (or to append)"`
	Encoding  string `json:"encoding,omitempty" enum:"utf-8,base64" default:"utf-8" jsonschema:"utf-8 (default): content is the text; base64: content is base64 (RFC 4648, padded) and its decoded bytes are written"`
	Append    bool   `json:"append,omitempty" default:"false" jsonschema:"add content at the end of the file instead of replacing it"`
	Overwrite *bool  `json:"overwrite,omitempty" default:"true" jsonschema:"replace an existing file (default true, with a warning); false refuses with ALREADY_EXISTS. Appending never needs it"`
}

func (writeTool) RefineSchema(s *jsonschema.Schema) {
	describePath(s.Properties["path"], "the file to write")
}

// WriteData is fs_write's data. In a dry run it says what the call would
// do (created, overwrote, bytes_written, created_dirs) and carries the diff.
type WriteData struct {
	Path          string   `json:"path"`
	ResolvedPath  string   `json:"resolved_path"`
	Mode          string   `json:"mode"` // "write" or "append"
	BytesWritten  int      `json:"bytes_written"`
	Created       bool     `json:"created"`
	Overwrote     bool     `json:"overwrote"`
	PreviousBytes int64    `json:"previous_bytes"`
	CreatedDirs   []string `json:"created_dirs"`
	Diff          string   `json:"diff,omitempty"`
	DiffTruncated bool     `json:"diff_truncated,omitempty"`
}

func (writeTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_write",
		Description: "Write a file: create it, replace it (overwrite, the default, with a warning) or append to it. " +
			"overwrite: false refuses an existing file (ALREADY_EXISTS). Missing parent directories are created. The write is atomic " +
			"(temporary file in the same directory, fsync, rename) and keeps the file's permissions. Content is UTF-8 text; binary content " +
			`must be sent base64-encoded with encoding "base64". Refused: anything inside .git or .warden, files with more than one hard link, ` +
			"non-regular files. The dry run shows the unified diff it would write. Needs fs.write on the file and on each directory it creates.",
		Capabilities: []capability.Kind{capability.FSWrite},
	}
}

// content returns the bytes the call writes.
func (a *writeArgs) content() ([]byte, *tool.Error) {
	if a.Encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil {
			return nil, tool.Errorf(tool.CodeInvalidInput, "content must be standard base64 (RFC 4648, with padding)", "content is not valid base64: %v", err)
		}
		return b, nil
	}
	if strings.IndexByte(a.Content, 0) >= 0 {
		return nil, tool.Errorf(tool.CodeNotText, `to write binary content, send it base64-encoded with encoding "base64"`, "content holds a NUL byte: it is not text")
	}
	return []byte(a.Content), nil
}

func trailingSlash(p string) *tool.Error {
	return fileSyntax(p, "fs_mkdir for a directory")
}

// Sinks: content lands in the file (as text; base64 content is bytes, no
// place for a mask).
func (writeTool) Sinks(c *tool.Call, a *writeArgs) ([]tool.Sink, error) {
	if a.Encoding == "base64" {
		return nil, nil
	}
	abs, e := fspath.Resolve(c.Workspace, a.Path)
	if e != nil {
		return nil, e
	}
	return []tool.Sink{{Arg: "/content", End: len(a.Content), Path: abs}}, nil
}

// Needs: fs.write on the resolved file and on every directory it creates.
func (writeTool) Needs(c *tool.Call, a *writeArgs) ([]capability.Need, error) {
	if _, e := a.content(); e != nil {
		return nil, e
	}
	if e := trailingSlash(a.Path); e != nil {
		return nil, e
	}
	abs, e := fspath.Resolve(c.Workspace, a.Path)
	if e != nil {
		return nil, e
	}
	if elem := fsProtected(c.Workspace, abs); elem != "" {
		return nil, protectedErr(a.Path, elem)
	}
	needs := []capability.Need{{Kind: capability.FSWrite, Resource: abs}}
	for _, d := range missingDirs(filepath.Dir(abs)) {
		needs = append(needs, capability.Need{Kind: capability.FSWrite, Resource: d})
	}
	return needs, nil
}

// writePlan is what fs_write found before writing; Preview renders it,
// Run carries it out.
type writePlan struct {
	a       writeArgs
	abs     string
	show    string // abs for display
	data    []byte
	loc     *fsLoc
	dirs    []string // directories to create, top-down
	dr      *os.Root // the parent directory, pinned (nil until it exists)
	name    string
	fi      fs.FileInfo // the existing file, or nil
	old     []byte      // its content, when read
	oldRead bool
}

func (pl *writePlan) close() {
	if pl.dr != nil {
		pl.dr.Close()
	}
	pl.loc.close()
}

func planWrite(c *tool.Call, a writeArgs, preview bool) (*writePlan, *tool.Error) {
	data, e := a.content()
	if e != nil {
		return nil, e
	}
	if e := trailingSlash(a.Path); e != nil {
		return nil, e
	}
	abs, e := fsRecheck(c, capability.FSWrite, a.Path, false)
	if e != nil {
		return nil, e
	}
	if elem := fsProtected(c.Workspace, abs); elem != "" {
		return nil, protectedErr(a.Path, elem)
	}
	loc, e := locate(c, capability.FSWrite, abs)
	if e != nil {
		return nil, e
	}
	pl := &writePlan{a: a, abs: abs, show: display(c.Workspace, abs), data: data, loc: loc}
	if loc.rel == "." {
		pl.close()
		return nil, tool.Errorf(tool.CodeInvalidInput, "write to a file inside it", "%s is a directory", fspath.Quote(a.Path))
	}
	pl.dirs = missingDirs(filepath.Dir(abs))
	for _, d := range pl.dirs {
		if !c.Grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: d}) {
			pl.close()
			return nil, changed(display(c.Workspace, d), d)
		}
	}
	if len(pl.dirs) > 0 {
		return pl, nil // a new file in new directories
	}
	if e := pl.inspect(c, preview); e != nil {
		pl.close()
		return nil, e
	}
	return pl, nil
}

// inspect pins the parent directory and checks the file as it is now.
func (pl *writePlan) inspect(c *tool.Call, preview bool) *tool.Error {
	a := pl.a
	dr, name, e := openParent(c, capability.FSWrite, pl.loc, a.Path)
	if e != nil {
		return e
	}
	pl.dr, pl.name = dr, name
	fi, err := dr.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fspath.Err(a.Path, err)
	}
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		return tool.Errorf(tool.CodePathEscape, "nothing was written; the path changed after it was checked — check it with fs_list and retry",
			"%s became a symlink after it was checked", fspath.Quote(a.Path))
	case m.IsDir():
		return tool.Errorf(tool.CodeInvalidInput, "write to a file inside it", "%s is a directory", fspath.Quote(a.Path))
	case !m.IsRegular():
		return notRegular(a.Path, m)
	case fspath.Nlink(fi) > 1:
		return tool.Errorf(tool.CodePolicyDenied,
			"copy it to a new file and write that, or remove its other links first",
			"%s has %d hard links: another name of the same file may be outside the granted tree, so fs tools do not write it", fspath.Quote(a.Path), fspath.Nlink(fi))
	case !a.Append && a.Overwrite != nil && !*a.Overwrite:
		return tool.Errorf(tool.CodeAlreadyExists, "pass overwrite: true to replace it, or append: true to add to it",
			"%s already exists (%d bytes)", fspath.Quote(a.Path), fi.Size())
	}
	pl.fi = fi
	canRead := c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: pl.abs})
	limit := int64(maxReadBytes)
	switch {
	case a.Append:
		limit = maxAppendBase
	case !preview || !canRead || fi.Size() > maxReadBytes:
		return nil // the old content is not needed, or not shown
	}
	f, err := dr.OpenFile(name, os.O_RDONLY|fspath.ONonblock|fspath.ONoctty, 0)
	if err != nil {
		return fspath.Err(a.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fspath.Err(a.Path, err)
	}
	if !os.SameFile(fi, st) {
		return tool.Errorf(tool.CodePathEscape, "nothing was written; the file was replaced while it was read — retry", "%s changed while it was read", fspath.Quote(a.Path))
	}
	old, e := readAll(f, st.Size(), limit, a.Path)
	if e != nil {
		if a.Append && e.Code == tool.CodeTooLarge {
			e.Hint = "appending copies the file (the write is atomic): append to files of at most 64 MiB, or use shell"
		}
		return e
	}
	pl.old, pl.oldRead = old, true
	return nil
}

func (pl *writePlan) mode() string {
	if pl.a.Append {
		return "append"
	}
	return "write"
}

func (pl *writePlan) warnings() []string {
	if pl.fi != nil && !pl.a.Append {
		return []string{fmt.Sprintf("overwrites an existing file: %s (%d bytes)", pl.show, pl.fi.Size())}
	}
	return nil
}

func (pl *writePlan) result() WriteData {
	d := WriteData{Path: pl.a.Path, ResolvedPath: pl.abs, Mode: pl.mode(), BytesWritten: len(pl.data),
		Created: pl.fi == nil, Overwrote: pl.fi != nil && !pl.a.Append, CreatedDirs: []string{}}
	if pl.fi != nil {
		d.PreviousBytes = pl.fi.Size()
	}
	return d
}

func (writeTool) Preview(ctx context.Context, c *tool.Call, a *writeArgs) tool.Outcome {
	pl, e := planWrite(c, *a, true)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer pl.close()
	d := pl.result()
	for _, dir := range pl.dirs {
		d.CreatedDirs = append(d.CreatedDirs, display(c.Workspace, dir))
	}
	var head strings.Builder
	switch {
	case pl.fi == nil:
		fmt.Fprintf(&head, "would create %s (%d bytes)", pl.show, len(pl.data))
	case a.Append:
		fmt.Fprintf(&head, "would append %d bytes to %s (%d bytes now)", len(pl.data), pl.show, pl.fi.Size())
	default:
		fmt.Fprintf(&head, "would overwrite %s (%d bytes) with %d bytes", pl.show, pl.fi.Size(), len(pl.data))
	}
	if len(d.CreatedDirs) > 0 {
		fmt.Fprintf(&head, ", creating the directories %s", strings.Join(d.CreatedDirs, ", "))
	}
	head.WriteString("\n")

	label := strings.TrimPrefix(pl.show, "/")
	oldLabel, newLabel := "a/"+label, "b/"+label
	var oldText, newText []byte
	shown := true
	switch {
	case pl.fi == nil:
		oldLabel = "/dev/null"
		newText = pl.data
	case !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: pl.abs}):
		shown = false
		fmt.Fprintf(&head, "(the current content is not shown: the grants do not allow reading %s)\n", pl.show)
	case !pl.oldRead && !a.Append:
		shown = false
		fmt.Fprintf(&head, "(the current content, %d bytes, is too large to show)\n", pl.fi.Size())
	default:
		oldText = pl.old
		newText = pl.data
		if a.Append {
			newText = append(append([]byte(nil), pl.old...), pl.data...)
		}
	}
	if !shown {
		// Only what the caller sent is shown.
		oldLabel += " (current content not shown)"
		oldText, newText = nil, pl.data
		if a.Append {
			newLabel += " (appended content)"
		}
	}
	diff, cut := renderDiff(oldLabel, newLabel, oldText, newText, maxDiffBytes)
	d.Diff, d.DiffTruncated = diff, cut
	return tool.Outcome{Output: head.String() + diff, Data: d, Warnings: pl.warnings()}
}

// renderDiff is the unified diff of two contents, or a one-line summary
// when either is not text.
func renderDiff(oldLabel, newLabel string, oldText, newText []byte, limit int) (string, bool) {
	if !isText(oldText) || !isText(newText) {
		return fmt.Sprintf("Binary files %s and %s differ: %d bytes (sha256 %s) → %d bytes (sha256 %s)\n",
			oldLabel, newLabel, len(oldText), fsSum(oldText), len(newText), fsSum(newText)), false
	}
	return unidiff.Unified(oldLabel, newLabel, string(oldText), string(newText), limit)
}

func fsSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

func (writeTool) Run(ctx context.Context, c *tool.Call, a *writeArgs) tool.Outcome {
	pl, e := planWrite(c, *a, false)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer pl.close()
	d := pl.result()
	if len(pl.dirs) > 0 {
		made, e := mkdirs(c, pl.loc, pl.dirs)
		if e == nil {
			e = pl.inspect(c, false) // the parent exists now: pin and check it
		}
		d = pl.result()
		d.CreatedDirs = displayAll(c.Workspace, made)
		if e != nil {
			return tool.Outcome{Err: e, Data: d}
		}
	}
	content := pl.data
	perm, keep := fs.FileMode(0o666), false
	if pl.fi != nil {
		perm, keep = pl.fi.Mode().Perm(), true
		if a.Append {
			content = append(pl.old, pl.data...)
		}
	}
	if err := atomicWrite(pl.dr, pl.name, content, perm, keep); err != nil {
		return tool.Outcome{Err: fspath.Err(a.Path, err), Data: d}
	}
	var out string
	switch {
	case pl.fi == nil:
		out = fmt.Sprintf("created %s (%d bytes)", pl.show, len(pl.data))
	case a.Append:
		out = fmt.Sprintf("appended %d bytes to %s (%d bytes now)", len(pl.data), pl.show, len(content))
	default:
		out = fmt.Sprintf("wrote %d bytes to %s (replaced %d bytes)", len(pl.data), pl.show, pl.fi.Size())
	}
	return tool.Outcome{Output: out, Data: d, Warnings: pl.warnings()}
}

func displayAll(ws string, abs []string) []string {
	out := make([]string, len(abs))
	for i, a := range abs {
		out[i] = display(ws, a)
	}
	return out
}

// atomicWrite replaces name in the pinned directory dr with data: a new
// temporary file in the same directory, written, chmod-ed (keepMode: to
// exactly perm, past the umask), fsync-ed, renamed over name, then the
// directory fsync-ed. A rename replaces the name itself: it never follows a
// symlink and never writes into another file's inode.
func atomicWrite(dr *os.Root, name string, data []byte, perm fs.FileMode, keepMode bool) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := ".warden-" + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := dr.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && keepMode {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dr.Rename(tmp, name)
	}
	if err != nil {
		dr.Remove(tmp)
		return err
	}
	if d, err := dr.Open("."); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// ---------------------------------------------------------------------------
// fs_mkdir

type mkdirTool struct{}

type mkdirArgs struct {
	Path    string `json:"path" minLength:"1" maxLength:"4096"`
	Parents *bool  `json:"parents,omitempty" default:"true" jsonschema:"create missing parent directories too (default true); false: a missing parent is NOT_FOUND"`
	ExistOK *bool  `json:"exist_ok,omitempty" default:"true" jsonschema:"succeed when the directory already exists (default true); false: ALREADY_EXISTS"`
}

func (mkdirTool) RefineSchema(s *jsonschema.Schema) {
	describePath(s.Properties["path"], "the directory to create")
}

func (a *mkdirArgs) parents() bool { return a.Parents == nil || *a.Parents }
func (a *mkdirArgs) existOK() bool { return a.ExistOK == nil || *a.ExistOK }

// MkdirData is fs_mkdir's data (in a dry run: what it would create).
type MkdirData struct {
	Path         string   `json:"path"`
	ResolvedPath string   `json:"resolved_path"`
	Created      bool     `json:"created"`
	CreatedDirs  []string `json:"created_dirs"`
}

func (mkdirTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_mkdir",
		Description: "Create a directory, and its missing parents unless parents is false. An existing directory is fine unless exist_ok " +
			"is false (ALREADY_EXISTS); an existing file of that name is ALREADY_EXISTS. Nothing inside .git or .warden. " +
			"The dry run lists the directories it would create. Needs fs.write on each directory it creates.",
		Capabilities: []capability.Kind{capability.FSWrite},
	}
}

// Needs: fs.write on the directory, and on each missing parent it would
// create.
func (mkdirTool) Needs(c *tool.Call, a *mkdirArgs) ([]capability.Need, error) {
	abs, e := fspath.Resolve(c.Workspace, a.Path)
	if e != nil {
		return nil, e
	}
	if elem := fsProtected(c.Workspace, abs); elem != "" {
		return nil, protectedErr(a.Path, elem)
	}
	needs := []capability.Need{{Kind: capability.FSWrite, Resource: abs}}
	if a.parents() {
		for _, d := range missingDirs(filepath.Dir(abs)) {
			needs = append(needs, capability.Need{Kind: capability.FSWrite, Resource: d})
		}
	}
	return needs, nil
}

type mkdirPlan struct {
	abs  string
	loc  *fsLoc
	dirs []string // nil: it exists
}

func planMkdir(c *tool.Call, a mkdirArgs) (*mkdirPlan, *tool.Error) {
	abs, e := fsRecheck(c, capability.FSWrite, a.Path, false)
	if e != nil {
		return nil, e
	}
	if elem := fsProtected(c.Workspace, abs); elem != "" {
		return nil, protectedErr(a.Path, elem)
	}
	loc, e := locate(c, capability.FSWrite, abs)
	if e != nil {
		return nil, e
	}
	pl := &mkdirPlan{abs: abs, loc: loc}
	fi, err := loc.root.Lstat(loc.rel)
	switch {
	case err == nil && fi.IsDir():
		if !a.existOK() {
			loc.close()
			return nil, tool.Errorf(tool.CodeAlreadyExists, "it is already there; pass exist_ok: true to accept that", "directory %s already exists", fspath.Quote(a.Path))
		}
		return pl, nil
	case err == nil:
		loc.close()
		return nil, tool.Errorf(tool.CodeAlreadyExists, "choose another name, or remove the file first", "%s exists and is a %s, not a directory", fspath.Quote(a.Path), typeName(fi.Mode()))
	case !errors.Is(err, fs.ErrNotExist):
		loc.close()
		return nil, fspath.Err(a.Path, err)
	}
	pl.dirs = missingDirs(abs)
	if len(pl.dirs) == 0 {
		pl.dirs = []string{abs} // appeared meanwhile; Mkdir decides
	}
	if len(pl.dirs) > 1 && !a.parents() {
		loc.close()
		return nil, tool.Errorf(tool.CodeNotFound, "pass parents: true to create it too",
			"the parent directory %s does not exist", display(c.Workspace, filepath.Dir(abs)))
	}
	for _, d := range pl.dirs {
		if !c.Grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: d}) {
			loc.close()
			return nil, changed(display(c.Workspace, d), d)
		}
	}
	return pl, nil
}

func (mkdirTool) Preview(ctx context.Context, c *tool.Call, a *mkdirArgs) tool.Outcome {
	pl, e := planMkdir(c, *a)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer pl.loc.close()
	d := MkdirData{Path: a.Path, ResolvedPath: pl.abs, Created: len(pl.dirs) > 0, CreatedDirs: displayAll(c.Workspace, pl.dirs)}
	if len(pl.dirs) == 0 {
		return tool.Outcome{Output: fmt.Sprintf("nothing to do: directory %s already exists", display(c.Workspace, pl.abs)), Data: d}
	}
	return tool.Outcome{Output: "would create the directories:\n" + strings.Join(d.CreatedDirs, "\n"), Data: d}
}

func (mkdirTool) Run(ctx context.Context, c *tool.Call, a *mkdirArgs) tool.Outcome {
	pl, e := planMkdir(c, *a)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer pl.loc.close()
	made, e := mkdirs(c, pl.loc, pl.dirs)
	d := MkdirData{Path: a.Path, ResolvedPath: pl.abs, Created: len(made) > 0, CreatedDirs: displayAll(c.Workspace, made)}
	if e != nil {
		return tool.Outcome{Err: e, Data: d}
	}
	if len(made) == 0 {
		return tool.Outcome{Output: fmt.Sprintf("directory %s already exists", display(c.Workspace, pl.abs)), Data: d}
	}
	return tool.Outcome{Output: "created " + strings.Join(d.CreatedDirs, ", "), Data: d}
}

// ---------------------------------------------------------------------------
// fs_remove

type removeTool struct{}

type removeArgs struct {
	Path      string `json:"path" minLength:"1" maxLength:"4096"`
	Recursive bool   `json:"recursive,omitempty" default:"false" jsonschema:"delete a directory and everything under it"`
	Force     bool   `json:"force,omitempty" default:"false" jsonschema:"a missing path is not an error (removed: false)"`
}

func (removeTool) RefineSchema(s *jsonschema.Schema) {
	describePath(s.Properties["path"], "what to delete")
}

// RemoveData is fs_remove's data (in a dry run: what it would remove).
type RemoveData struct {
	Path             string   `json:"path"`
	ResolvedPath     string   `json:"resolved_path"`
	Removed          bool     `json:"removed"`
	Type             string   `json:"type,omitempty"` // file, dir, symlink, fifo, socket, device, other
	Recursive        bool     `json:"recursive"`
	Files            int      `json:"files"` // everything that is not a directory, under a recursive delete
	Dirs             int      `json:"dirs"`  // directories under a recursive delete, itself included
	Entries          []string `json:"entries"`
	EntriesTruncated bool     `json:"entries_truncated"`
}

func (removeTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_remove",
		Description: "Delete a file, a symlink (the link itself, not its target) or an empty directory, with a warning. recursive: true deletes " +
			"a directory and everything under it (a loud warning; the dry run counts and lists what would go). force: true makes a missing " +
			"path a success with removed: false instead of NOT_FOUND. Refused: the workspace itself, anything inside .git or .warden, and a " +
			"recursive delete of a tree that holds one. Needs fs.write on the path; for a recursive delete that one grant on the directory " +
			"covers everything under it.",
		Capabilities: []capability.Kind{capability.FSWrite},
	}
}

func removeTarget(c *tool.Call, p string, recheck bool) (string, *tool.Error) {
	if e := fspath.CheckPath(p); e != nil {
		return "", e
	}
	if last := filepath.Base(p); last == "." || last == ".." {
		return "", tool.Errorf(tool.CodeInvalidInput, "name the directory itself (a/b, not a/b/. or a/b/c/..)",
			"refusing to remove %s: it ends in %q", fspath.Quote(p), last)
	}
	var abs string
	var e *tool.Error
	if recheck {
		abs, e = fsRecheck(c, capability.FSWrite, p, true)
	} else {
		abs, e = resolveNoFollow(c.Workspace, p)
	}
	if e != nil {
		return "", e
	}
	if abs == c.Workspace || abs == "/" {
		return "", tool.Errorf(tool.CodeInvalidInput, "remove the entries inside it instead", "refusing to remove %s: it is the workspace (or /) itself", fspath.Quote(p))
	}
	if elem := fsProtected(c.Workspace, abs); elem != "" {
		return "", protectedErr(p, elem)
	}
	return abs, nil
}

// Needs: fs.write on the path (a final symlink is not followed: the link is
// what is removed).
func (removeTool) Needs(c *tool.Call, a *removeArgs) ([]capability.Need, error) {
	abs, e := removeTarget(c, a.Path, false)
	if e != nil {
		return nil, e
	}
	return []capability.Need{{Kind: capability.FSWrite, Resource: abs}}, nil
}

type removePlan struct {
	d    RemoveData
	loc  *fsLoc
	dr   *os.Root
	name string
	dir  bool
}

func (pl *removePlan) close() {
	if pl.dr != nil {
		pl.dr.Close()
	}
	pl.loc.close()
}

func planRemove(c *tool.Call, a removeArgs) (*removePlan, *tool.Error) {
	abs, e := removeTarget(c, a.Path, true)
	if e != nil {
		return nil, e
	}
	loc, e := locate(c, capability.FSWrite, abs)
	if e != nil {
		return nil, e
	}
	pl := &removePlan{loc: loc, d: RemoveData{Path: a.Path, ResolvedPath: abs, Recursive: a.Recursive, Entries: []string{}}}
	if loc.rel == "." {
		pl.close()
		return nil, tool.Errorf(tool.CodeInvalidInput, "remove the entries inside it instead",
			"refusing to remove %s: it is the root of a grant", fspath.Quote(a.Path))
	}
	dr, name, e := openParent(c, capability.FSWrite, loc, a.Path)
	if e != nil {
		pl.close()
		return nil, e
	}
	pl.dr, pl.name = dr, name
	fi, err := dr.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && a.Force {
		return pl, nil
	}
	if err != nil {
		pl.close()
		e := fspath.Err(a.Path, err)
		if e.Code == tool.CodeNotFound {
			e.Hint = "check the path with fs_list; pass force: true to accept a missing path"
		}
		return nil, e
	}
	pl.d.Type = typeName(fi.Mode())
	if !fi.IsDir() {
		pl.d.Files = 1
		return pl, nil
	}
	pl.dir = true
	sub, err := subRoot(dr, name)
	if err != nil {
		pl.close()
		return nil, fspath.Err(a.Path, err)
	}
	defer sub.Close()
	base := display(c.Workspace, abs)
	if !a.Recursive {
		f, err := sub.OpenFile(".", os.O_RDONLY|fspath.ODirectory|fspath.ONonblock, 0)
		if err != nil {
			pl.close()
			return nil, fspath.Err(a.Path, err)
		}
		ents, _ := f.ReadDir(maxRemoveListing + 1)
		f.Close()
		if len(ents) > 0 {
			pl.close()
			names := make([]string, 0, len(ents))
			for _, e := range ents {
				names = append(names, e.Name())
			}
			more := ""
			if len(ents) > maxRemoveListing {
				names, more = names[:maxRemoveListing], ", …"
			}
			return nil, tool.Errorf(tool.CodeInvalidInput, "pass recursive: true to delete it and everything under it",
				"directory %s is not empty (it holds %s%s)", fspath.Quote(a.Path), strings.Join(names, ", "), more)
		}
		pl.d.Dirs = 1
		return pl, nil
	}
	var protected string
	err = fs.WalkDir(safeFS{sub}, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: RemoveAll will say
		}
		if p != "." && protectedElem(d.Name()) {
			protected = path.Join(base, p)
			return fs.SkipAll
		}
		full := filepath.Join(abs, filepath.FromSlash(p))
		if entry, prot := c.Protect.Match(c.Workspace, full); prot {
			protected = path.Join(base, p) + " (the policy's protect: " + strconv.Quote(entry) + ")"
			return fs.SkipAll
		}
		if entry, hidden := c.Hidden(full); hidden {
			protected = path.Join(base, p) + " (hidden: " + strconv.Quote(entry) + ")"
			return fs.SkipAll
		}
		if d.IsDir() {
			pl.d.Dirs++
		} else {
			pl.d.Files++
		}
		if p != "." {
			if len(pl.d.Entries) < maxRemoveListing {
				pl.d.Entries = append(pl.d.Entries, path.Join(base, p))
			} else {
				pl.d.EntriesTruncated = true
			}
		}
		return nil
	})
	if protected != "" {
		pl.close()
		return nil, tool.Errorf(tool.CodePolicyDenied,
			"delete the other entries one by one; fs tools never delete git internals or warden's configuration",
			"%s holds %s: a recursive delete would remove .git, .warden or a protected path", fspath.Quote(a.Path), protected)
	}
	if err != nil {
		pl.close()
		return nil, fspath.Err(a.Path, err)
	}
	return pl, nil
}

func (pl *removePlan) warnings(show string, a removeArgs) []string {
	switch {
	case pl.d.Type == "":
		return nil
	case pl.dir && a.Recursive:
		return []string{fmt.Sprintf("RECURSIVE DELETE: %s and everything under it — %d files, %d directories", show, pl.d.Files, pl.d.Dirs)}
	}
	return []string{fmt.Sprintf("deletes %s (%s)", show, pl.d.Type)}
}

func (removeTool) Preview(ctx context.Context, c *tool.Call, a *removeArgs) tool.Outcome {
	pl, e := planRemove(c, *a)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer pl.close()
	show := display(c.Workspace, pl.d.ResolvedPath)
	pl.d.Removed = pl.d.Type != ""
	if pl.d.Type == "" {
		return tool.Outcome{Output: fmt.Sprintf("nothing to remove: %s does not exist", show), Data: pl.d}
	}
	var out strings.Builder
	if pl.dir && a.Recursive {
		fmt.Fprintf(&out, "would remove %s and everything under it: %d files, %d directories\n", show, pl.d.Files, pl.d.Dirs)
		for _, e := range pl.d.Entries {
			out.WriteString(e + "\n")
		}
		if pl.d.EntriesTruncated {
			fmt.Fprintf(&out, "… and %d more\n", pl.d.Files+pl.d.Dirs-1-len(pl.d.Entries))
		}
	} else {
		fmt.Fprintf(&out, "would remove %s (%s)\n", show, pl.d.Type)
	}
	return tool.Outcome{Output: out.String(), Data: pl.d, Warnings: pl.warnings(show, *a)}
}

func (removeTool) Run(ctx context.Context, c *tool.Call, a *removeArgs) tool.Outcome {
	pl, e := planRemove(c, *a)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer pl.close()
	show := display(c.Workspace, pl.d.ResolvedPath)
	if pl.d.Type == "" {
		return tool.Outcome{Output: fmt.Sprintf("nothing to remove: %s does not exist", show), Data: pl.d}
	}
	var err error
	if pl.dir && a.Recursive {
		err = pl.dr.RemoveAll(pl.name)
	} else {
		err = pl.dr.Remove(pl.name)
	}
	if err != nil {
		return tool.Outcome{Err: fspath.Err(a.Path, err), Data: pl.d}
	}
	pl.d.Removed = true
	out := fmt.Sprintf("removed %s (%s)", show, pl.d.Type)
	if pl.dir && a.Recursive {
		out = fmt.Sprintf("removed %s and everything under it: %d files, %d directories", show, pl.d.Files, pl.d.Dirs)
	}
	return tool.Outcome{Output: out, Data: pl.d, Warnings: pl.warnings(show, *a)}
}
