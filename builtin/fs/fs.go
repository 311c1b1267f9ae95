// Package fs is the fs family: fs_read, fs_write, fs_list, fs_mkdir,
// fs_remove, fs_glob and read_files.
//
// How a path is reached — four layers, each enough on its own for the common
// case, together closing the races:
//
//  1. Needs resolves the path with capability.ResolvePath (every symlink in
//     the existing part followed, ".." applied as the kernel would) and the
//     gate checks the resolved path against the grants.
//  2. Run resolves it again and re-checks the grants: a path that changed
//     since the gate's check into something not granted is PATH_ESCAPE.
//  3. The access itself goes through an os.Root opened on the base of the
//     grant that allows the path (fs.read:/etc/nginx/** → /etc/nginx;
//     fs.read:** → the workspace), with the resolved path relative to it.
//     os.Root follows no symlink, and no "..", out of that tree, whatever
//     happens meanwhile. Writes, mkdir and remove first pin the parent
//     directory as its own os.Root, so the check below and the operation
//     are about the same directory even if the path is swapped in between.
//  4. After opening, the kernel's name for what was actually opened
//     (/proc/self/fd) is checked against the grants again, and for writes
//     against the .git/.warden rule. This catches what os.Root alone cannot:
//     a grant narrower than its base (fs.read:notes/*.md has the base
//     notes/, where a symlink could point at notes/secret.txt). Where /proc
//     is not mounted this layer is skipped and os.Root is the boundary.
//
// Choices (see also each tool's description):
//
//   - Text: fs_read refuses content with a NUL byte or invalid UTF-8
//     anywhere (not only in the first 8 KiB: the content is at most 1 MiB,
//     and what is returned must survive JSON unchanged) with NOT_TEXT, unless
//     encoding "base64" asks for the bytes explicitly. fs_write with
//     encoding "base64" writes the decoded bytes; utf-8 content holding NUL
//     is NOT_TEXT.
//   - Size: reads above 1 MiB (768 KiB with base64, so the encoded text fits
//     the envelope) are TOO_LARGE, never truncated: a truncated file that is
//     edited and written back loses its tail silently.
//   - .git and .warden: writes (fs_write, fs_mkdir, fs_remove) to anything
//     with a path element named .git or .warden — any depth, any case, with
//     trailing dots/spaces and the code points HFS+ ignores removed, and the
//     8.3 name GIT~1 — are POLICY_DENIED: a fixed rule of warden's, not of
//     the policy file, so a grant as wide as fs.write:** cannot plant a git
//     hook or rewrite the policy. A recursive remove of a tree holding one is
//     refused too. Reading them is an ordinary read.
//   - Hard links: a regular file with more than one link is not written
//     (POLICY_DENIED): another name of the same file may be outside the
//     granted tree. Writes are temp file + rename anyway, which replaces the
//     name rather than changing the shared inode, so this is belt and
//     braces. Reading such a file is allowed: a hard link is the file itself,
//     indistinguishable from one that was always there, and creating it took
//     access to both places. fs_remove of a hard link removes only that name.
//   - Non-regular files (FIFO, socket, device) are never opened for reading
//     or written: checked with Lstat first, then opened with O_NONBLOCK and
//     checked again with Fstat, so a FIFO swapped in never blocks a call.
//   - Symlink loops end with INVALID_INPUT ("too many levels of symbolic
//     links"), from ResolvePath's 40-hop limit or the kernel's ELOOP.
//   - PATH_ESCAPE means the path left every granted tree at access time (a
//     race, or a symlink os.Root refused), or kept changing while it was
//     resolved; an ungranted path found before anything runs is the gate's
//     CAPABILITY_DENIED.
//
// Needs, tool by tool:
//
//   - fs_read, fs_list: fs.read on the resolved path.
//   - read_files: fs.read on every resolved path; one ungranted path refuses
//     the whole call (CAPABILITY_DENIED, naming it). Files that cannot be
//     read for other reasons are skipped and listed with code and reason.
//   - fs_glob: fs.read on the pattern's literal base directory (the part
//     before the first wildcard); each match is resolved and kept only when
//     the grants allow reading it (the rest are counted in
//     omitted_by_grants). Symlinked directories are not descended into.
//   - fs_write: fs.write on the resolved file and on each missing parent
//     directory it creates. The dry run's diff shows the current content only
//     when the grants also allow reading the file; otherwise it shows only
//     what the call sends.
//   - fs_mkdir: fs.write on the directory and each missing parent it creates.
//   - fs_remove: fs.write on the path, its last element not followed (a
//     symlink is removed, not its target). For recursive: true this one need
//     is for the directory itself: a grant allowing the directory (notes/**
//     also matches notes) allows deleting everything under it. Paths ending
//     in "." or "..", the workspace itself and the root of a grant are
//     refused.
package fs

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/builtin/internal/fspath"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
)

// Limits of the fs tools.
const (
	maxReadBytes     = 1 << 20   // fs_read, utf-8
	maxReadBase64    = 768 << 10 // fs_read, base64: encodes to 1 MiB
	maxAppendBase    = 64 << 20  // an append copies the file: at most this much
	maxListEntries   = 10000
	maxGlobResults   = 1000
	maxReadFiles     = 100
	maxDiffBytes     = 64 << 10
	maxRemoveListing = 20
)

// Tools returns the fs family: fs_read, fs_write, fs_list, fs_mkdir,
// fs_remove, fs_glob and read_files. They take the workspace and the grants
// from each Call, so they need no configuration.
func Tools() []tool.Tool {
	return []tool.Tool{
		tool.Adapt[readArgs](readTool{}),
		tool.Adapt[writeArgs](writeTool{}),
		tool.Adapt[listArgs](listTool{}),
		tool.Adapt[mkdirArgs](mkdirTool{}),
		tool.Adapt[removeArgs](removeTool{}),
		tool.Adapt[globArgs](globTool{}),
		tool.Adapt[readFilesArgs](readFilesTool{}),
	}
}

var (
	_ tool.Typed[readArgs]            = readTool{}
	_ tool.Typed[writeArgs]           = writeTool{}
	_ tool.TypedPreviewer[writeArgs]  = writeTool{}
	_ tool.TypedSinker[writeArgs]     = writeTool{}
	_ tool.Typed[listArgs]            = listTool{}
	_ tool.Typed[mkdirArgs]           = mkdirTool{}
	_ tool.TypedPreviewer[mkdirArgs]  = mkdirTool{}
	_ tool.Typed[removeArgs]          = removeTool{}
	_ tool.TypedPreviewer[removeArgs] = removeTool{}
	_ tool.Typed[globArgs]            = globTool{}
	_ tool.Typed[readFilesArgs]       = readFilesTool{}
	_ tool.SchemaRefiner              = readTool{}
	_ tool.SchemaRefiner              = writeTool{}
	_ tool.SchemaRefiner              = listTool{}
	_ tool.SchemaRefiner              = mkdirTool{}
	_ tool.SchemaRefiner              = removeTool{}
	_ tool.SchemaRefiner              = readFilesTool{}
)

// describePath sets the description of a path argument's schema p (a
// property, or the items of an array of paths): what it names, then
// pathDesc. The struct tags carry its other keywords (minLength 1,
// maxLength 4096); a tag cannot build a description from a constant.
func describePath(p *jsonschema.Schema, what string) {
	p.Description = what + ": " + pathDesc
}

const pathDesc = "a path relative to the workspace, or an absolute path a grant allows (e.g. /etc/nginx/nginx.conf under fs.read:/etc/nginx/**)"

// ---------------------------------------------------------------------------
// Paths, names and errors.

// resolveNoFollow resolves p's parent but keeps its last element, so that a
// symlink names itself (fs_remove removes a link, not its target). A path
// ending in "/", "." or ".." is resolved in full.
func resolveNoFollow(ws, p string) (string, *tool.Error) {
	if e := fspath.CheckPath(p); e != nil {
		return "", e
	}
	if strings.HasSuffix(p, "/") {
		return fspath.Resolve(ws, p)
	}
	dir, last := filepath.Split(p)
	if last == "." || last == ".." {
		return fspath.Resolve(ws, p)
	}
	if dir == "" {
		dir = "."
	}
	parent, err := fspath.ResolvePath(ws, dir)
	if err != nil {
		return "", fspath.Err(p, err)
	}
	return filepath.Join(parent, last), nil
}

// fileSyntax refuses a path that can only name a directory: ending in a
// slash, "." or "..".
func fileSyntax(p, instead string) *tool.Error {
	last := p[strings.LastIndexByte(p, '/')+1:]
	if last == "" || last == "." || last == ".." {
		return tool.Errorf(tool.CodeInvalidInput, "name the file itself (no trailing /, . or ..); use "+instead,
			"%s names a directory", fspath.Quote(p))
	}
	return nil
}

// under returns p relative to base when p is base or lies under it. Both
// are absolute, cleaned, symlink-free paths; this only chooses which tree to
// open — access control is os.Root's and verify's.
func under(base, p string) (string, bool) {
	switch {
	case p == base:
		return ".", true
	case base == "/":
		return p[1:], true
	case strings.HasPrefix(p, base) && p[len(base)] == '/':
		return p[len(base)+1:], true
	}
	return "", false
}

// display names abs for output: relative to the workspace when under it.
func display(ws, abs string) string {
	if rel, ok := under(ws, abs); ok {
		return rel
	}
	return abs
}

// ignorable reports the code points HFS+ ignores in file names (git's
// is_hfs_dotgit list), which would let ".g\u200cit" name .git there.
func ignorable(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}

// protectedElem reports whether a path element names .git or .warden on
// some file system: any case, trailing dots and spaces (Windows), ignorable
// code points (HFS+), the 8.3 short name GIT~1.
func protectedElem(e string) bool {
	if e == "" || e[0] != '.' && e[0] != 'g' && e[0] != 'G' && !strings.ContainsFunc(e, ignorable) {
		return false
	}
	e = strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, e)
	e = strings.TrimRight(e, ". ")
	return strings.EqualFold(e, ".git") || strings.EqualFold(e, ".warden") || strings.EqualFold(e, "git~1")
}

// fsProtected returns the element of abs (taken relative to the workspace
// when under it, else whole) that is .git or .warden, or "".
func fsProtected(ws, abs string) string {
	rel := abs
	if r, ok := under(ws, abs); ok {
		rel = r
	}
	for e := range strings.SplitSeq(rel, "/") {
		if protectedElem(e) {
			return e
		}
	}
	return ""
}

func protectedErr(p, elem string) *tool.Error {
	return tool.Errorf(tool.CodePolicyDenied,
		"warden never writes git internals or its own configuration: change a repository with the git tools (git_apply_patch, git_commit) and the policy by hand",
		"%s is inside %s: fs tools do not write .git or .warden", fspath.Quote(p), strconv.Quote(elem))
}

// changed reports a path that no longer resolves to what the gate allowed.
func changed(p, now string) *tool.Error {
	return tool.Errorf(tool.CodePathEscape,
		"nothing was done; the path (or a symlink on it) changed after it was checked — check it with fs_list and retry",
		"%s now resolves to %s, which the grants do not allow", fspath.Quote(p), now)
}

func notRegular(p string, m fs.FileMode) *tool.Error {
	return tool.Errorf(tool.CodeInvalidInput, "fs tools only read and write regular files",
		"%s is a %s, not a regular file", fspath.Quote(p), typeName(m))
}

// typeName names a file type.
func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}

// ---------------------------------------------------------------------------
// Roots and verification.

// fsLoc is a path located in an os.Root.
type fsLoc struct {
	root *os.Root
	dir  string // the absolute directory root is opened on
	rel  string // the path relative to it ("." for dir itself)
}

func (l *fsLoc) close() {
	if l != nil && l.root != nil {
		l.root.Close()
	}
}

// locate opens the os.Root for target: on the base of the narrowest grant
// of kind that allows target and whose base holds it, or — when no single
// grant does (an intersection of sets) — on target's parent. A base that does
// not exist yet (a directory about to be created) is replaced by its nearest
// existing ancestor; verify still checks what is actually touched.
func locate(c *tool.Call, kind capability.Kind, target string) (*fsLoc, *tool.Error) {
	need := capability.Need{Kind: kind, Resource: target}
	best := ""
	for _, g := range c.Grants.Grants() {
		if g.Kind() != kind {
			continue
		}
		b := g.Base(c.Workspace)
		if b == "" || len(b) <= len(best) {
			continue
		}
		if _, ok := under(b, target); !ok {
			continue
		}
		if capability.NewSet(c.Workspace, g).Allows(need) {
			best = b
		}
	}
	if best == "" {
		best = filepath.Dir(target)
	}
	for dir := best; ; dir = filepath.Dir(dir) {
		// "/." makes the kernel insist on a directory: a FIFO swapped in
		// fails with ENOTDIR instead of blocking the open.
		r, err := os.OpenRoot(strings.TrimSuffix(dir, "/") + "/.")
		if err == nil {
			rel, _ := under(dir, target)
			return &fsLoc{root: r, dir: dir, rel: rel}, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || dir == "/" {
			return nil, fspath.Err(target, err)
		}
	}
}

// subRoot opens directory rel of root as its own root, pinning it. The
// trailing "/." makes every element, the last included, be opened as a
// directory (no FIFO can block it).
func subRoot(root *os.Root, rel string) (*os.Root, error) {
	return root.OpenRoot(rel + "/.")
}

// verify checks that what f names (joined with name, when the operation is
// on an entry of the directory f) is allowed by the call's grants for kind,
// and, for writes, is not .git or .warden.
func verify(c *tool.Call, kind capability.Kind, f *os.File, name, p string) *tool.Error {
	real, err := fspath.RealPath(f)
	if err != nil {
		return tool.Errorf(tool.CodeToolError, "", "%s: cannot tell what was opened: %v", fspath.Quote(p), err)
	}
	if real == "" {
		return nil
	}
	if name != "" {
		real = filepath.Join(real, name)
	}
	if !c.Grants.Allows(capability.Need{Kind: kind, Resource: real}) {
		return changed(p, real)
	}
	if kind == capability.FSWrite {
		if elem := fsProtected(c.Workspace, real); elem != "" {
			return protectedErr(p, elem)
		}
	}
	return nil
}

// openParent opens the parent directory of loc's target as its own root
// and verifies that the target in it is allowed for kind. The caller closes
// the root and works on filepath.Base(loc.rel) in it.
func openParent(c *tool.Call, kind capability.Kind, loc *fsLoc, p string) (*os.Root, string, *tool.Error) {
	dr, err := subRoot(loc.root, filepath.Dir(loc.rel))
	if err != nil {
		return nil, "", fspath.Err(p, err)
	}
	name := filepath.Base(loc.rel)
	d, err := dr.Open(".")
	if err != nil {
		dr.Close()
		return nil, "", fspath.Err(p, err)
	}
	e := verify(c, kind, d, name, p)
	d.Close()
	if e != nil {
		dr.Close()
		return nil, "", e
	}
	return dr, name, nil
}

// fsRecheck resolves p again at run time and checks that the grants still
// allow it: a path changed after the gate's check is PATH_ESCAPE.
func fsRecheck(c *tool.Call, kind capability.Kind, p string, noFollow bool) (string, *tool.Error) {
	var abs string
	var e *tool.Error
	if noFollow {
		abs, e = resolveNoFollow(c.Workspace, p)
	} else {
		abs, e = fspath.Resolve(c.Workspace, p)
	}
	if e != nil {
		return "", e
	}
	if !c.Grants.Allows(capability.Need{Kind: kind, Resource: abs}) {
		return "", changed(p, abs)
	}
	// The policy's hide: and protect: lists, again on what p names now.
	if entry, hidden := c.Hidden(abs); hidden {
		return "", gate.HiddenError(abs, entry)
	}
	if entry, prot := c.Protect.Match(c.Workspace, abs); prot && kind == capability.FSWrite {
		return "", gate.ProtectedError(abs, entry)
	}
	return abs, nil
}

// missingDirs returns dir and those of its ancestors that do not exist,
// top-down. dir is absolute with its existing part symlink-free, as
// ResolvePath returns it; this only plans, every creation is checked again.
func missingDirs(dir string) []string {
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		out = append(out, d)
		if d == "/" {
			break
		}
	}
	slices.Reverse(out)
	return out
}

// mkdirs creates the directories dirs (absolute, top-down) inside loc's
// root, each in its pinned, verified parent. It returns those it created.
func mkdirs(c *tool.Call, loc *fsLoc, dirs []string) ([]string, *tool.Error) {
	var made []string
	for _, d := range dirs {
		rel, ok := under(loc.dir, d)
		if !ok || rel == "." {
			return made, changed(d, d)
		}
		show := display(c.Workspace, d)
		if !c.Grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: d}) {
			return made, changed(show, d)
		}
		sub := &fsLoc{root: loc.root, dir: loc.dir, rel: rel}
		pr, name, e := openParent(c, capability.FSWrite, sub, show)
		if e != nil {
			return made, e
		}
		err := pr.Mkdir(name, 0o777)
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := pr.Lstat(name); serr == nil && fi.IsDir() {
				err = nil // made meanwhile: fine
			}
		} else if err == nil {
			made = append(made, d)
		}
		pr.Close()
		if err != nil {
			return made, fspath.Err(show, err)
		}
	}
	return made, nil
}

// ---------------------------------------------------------------------------
// Reading.

// isText reports whether data is text: UTF-8 without NUL bytes.
func isText(data []byte) bool {
	return bytes.IndexByte(data, 0) < 0 && utf8.Valid(data)
}

// openRegular opens rel in root for reading, refusing anything but a
// regular file without ever blocking, and verifies what was opened.
func openRegular(c *tool.Call, root *os.Root, rel, p string) (*os.File, fs.FileInfo, *tool.Error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, nil, fspath.Err(p, err)
	}
	if m := fi.Mode(); m.IsDir() {
		return nil, nil, tool.Errorf(tool.CodeInvalidInput, "list it with fs_list", "%s is a directory", fspath.Quote(p))
	} else if !m.IsRegular() && m&fs.ModeSymlink == 0 {
		return nil, nil, notRegular(p, m)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|fspath.ONonblock|fspath.ONoctty, 0)
	if err != nil {
		return nil, nil, fspath.Err(p, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fspath.Err(p, err)
	}
	if m := st.Mode(); m.IsDir() {
		f.Close()
		return nil, nil, tool.Errorf(tool.CodeInvalidInput, "list it with fs_list", "%s is a directory", fspath.Quote(p))
	} else if !m.IsRegular() {
		f.Close()
		return nil, nil, notRegular(p, m)
	}
	if e := verify(c, capability.FSRead, f, "", p); e != nil {
		f.Close()
		return nil, nil, e
	}
	return f, st, nil
}

// readAll reads f (of size size) up to limit bytes, TOO_LARGE above it.
func readAll(f *os.File, size, limit int64, p string) ([]byte, *tool.Error) {
	tooLarge := func(n int64) *tool.Error {
		return tool.Errorf(tool.CodeTooLarge,
			"read a part with shell (sed -n '1,200p' FILE, head -c 65536 FILE) or search it with rg",
			"%s is %d bytes; fs tools read at most %d", fspath.Quote(p), n, limit)
	}
	if size > limit {
		return nil, tooLarge(size)
	}
	var buf bytes.Buffer
	buf.Grow(int(size) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, fspath.Err(p, err)
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge(int64(buf.Len()))
	}
	return buf.Bytes(), nil
}

// readPath reads the file at p for a call (fs_read, read_files): resolved
// and re-checked, located in its grant's root, opened without blocking,
// verified, capped at limit (TOO_LARGE above), and checked for text unless
// raw.
func readPath(c *tool.Call, p string, raw bool, limit int64) ([]byte, string, *tool.Error) {
	if e := fileSyntax(p, "fs_list for a directory"); e != nil {
		return nil, "", e
	}
	abs, e := fsRecheck(c, capability.FSRead, p, false)
	if e != nil {
		return nil, "", e
	}
	loc, e := locate(c, capability.FSRead, abs)
	if e != nil {
		return nil, abs, e
	}
	defer loc.close()
	f, st, e := openRegular(c, loc.root, loc.rel, p)
	if e != nil {
		return nil, abs, e
	}
	defer f.Close()
	data, e := readAll(f, st.Size(), limit, p)
	if e != nil {
		return nil, abs, e
	}
	if !raw && !isText(data) {
		return nil, abs, tool.Errorf(tool.CodeNotText, `it looks binary (a NUL byte or invalid UTF-8): read its bytes with encoding "base64"`,
			"%s is not UTF-8 text", fspath.Quote(p))
	}
	return data, abs, nil
}

// ---------------------------------------------------------------------------
// fs_read

type readTool struct{}

type readArgs struct {
	Path     string `json:"path" minLength:"1" maxLength:"4096"`
	Encoding string `json:"encoding,omitempty" enum:"utf-8,base64" default:"utf-8" jsonschema:"utf-8 (default): the text itself; base64: the raw bytes, base64-encoded (for binary files)"`
}

func (readTool) RefineSchema(s *jsonschema.Schema) {
	describePath(s.Properties["path"], "the file to read")
}

// ReadData is fs_read's data.
type ReadData struct {
	Path         string `json:"path"`
	ResolvedPath string `json:"resolved_path"`
	Encoding     string `json:"encoding"`
	BytesRead    int    `json:"bytes_read"`
}

func (readTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "fs_read",
		Description: "Read a text file and return its content. Text only: a file holding a NUL byte or invalid UTF-8 is NOT_TEXT unless " +
			`encoding is "base64", which returns the bytes base64-encoded (refused for a file holding a secret, which base64 would carry past the masking: read such a file as text). At most 1 MiB (768 KiB with base64); larger files are TOO_LARGE, never cut. ` +
			"Needs fs.read on the file (symlinks resolved).",
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

func (readTool) Needs(c *tool.Call, a *readArgs) ([]capability.Need, error) {
	abs, e := fspath.Resolve(c.Workspace, a.Path)
	if e != nil {
		return nil, e
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: abs}}, nil
}

func (readTool) Run(ctx context.Context, c *tool.Call, a *readArgs) tool.Outcome {
	raw := a.Encoding == "base64"
	limit := int64(maxReadBytes)
	if raw {
		limit = maxReadBase64
	}
	data, abs, e := readPath(c, a.Path, raw, limit)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if raw && holdsSecret(ctx, data) {
		// base64 would carry the secret past the masking every result
		// gets (the redactor reads text, not its encoding).
		return tool.Fail(tool.CodeOperationNotSupported,
			"read it as text (the default encoding), where secrets come masked; a binary file that holds a secret is not read through warden",
			"%s holds a secret, which base64 would carry past warden's masking", a.Path)
	}
	d := ReadData{Path: a.Path, ResolvedPath: abs, Encoding: "utf-8", BytesRead: len(data)}
	out := string(data)
	if raw {
		d.Encoding = "base64"
		out = base64.StdEncoding.EncodeToString(data)
	}
	return tool.Outcome{Output: out, Data: d, Origins: []tool.Origin{{Path: abs}}}
}

// holdsSecret reports whether the gate's redactor (the default rules when
// the call did not come through a gate) would mask something in data read
// as text.
func holdsSecret(ctx context.Context, data []byte) bool {
	if g, ok := gate.GateFrom(ctx); ok {
		return g.HoldsSecret(string(data))
	}
	return redact.Contains(string(data))
}

// ---------------------------------------------------------------------------
// read_files

type readFilesTool struct{}

type readFilesArgs struct {
	FilePaths []string `json:"file_paths" minItems:"1" maxItems:"100" items.minLength:"1" items.maxLength:"4096" jsonschema:"the files to read, in order"`
}

func (readFilesTool) RefineSchema(s *jsonschema.Schema) {
	describePath(s.Properties["file_paths"].Items, "a file to read")
}

// ReadFilesData is read_files' data.
type ReadFilesData struct {
	FilesReadCount int              `json:"files_read_count"`
	Files          []ReadFilesEntry `json:"files"`
	SkippedFiles   []SkippedFile    `json:"skipped_files"`
}

// ReadFilesEntry is one file read_files read.
type ReadFilesEntry struct {
	Path      string `json:"path"`
	BytesRead int    `json:"bytes_read"`
}

// SkippedFile is one file read_files could not read, and why.
type SkippedFile struct {
	Path   string    `json:"path"`
	Code   tool.Code `json:"code"`
	Reason string    `json:"reason"`
}

func (readFilesTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "read_files",
		Description: "Read several text files at once; the output concatenates them, each after a line \"==> PATH <==\". " +
			"A file that cannot be read (missing, binary, too large, not a regular file) is skipped and listed in skipped_files with its error code " +
			"and reason; the other files are still returned. At most 100 paths and 1 MiB in all. Needs fs.read on every path.",
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

// Needs: fs.read for every path that resolves. A path that cannot be
// resolved (a symlink loop) needs nothing: Run touches nothing for it and
// lists it as skipped. A path no file can have (NUL, too long) refuses the
// call.
func (readFilesTool) Needs(c *tool.Call, a *readFilesArgs) ([]capability.Need, error) {
	if len(a.FilePaths) > maxReadFiles {
		return nil, tool.Errorf(tool.CodeInvalidInput, "split the list", "%d paths; read_files reads at most %d", len(a.FilePaths), maxReadFiles)
	}
	var needs []capability.Need
	for _, p := range a.FilePaths {
		if e := fspath.CheckPath(p); e != nil {
			return nil, e
		}
		abs, e := fspath.Resolve(c.Workspace, p)
		if e != nil {
			continue
		}
		n := capability.Need{Kind: capability.FSRead, Resource: abs}
		if !slices.Contains(needs, n) {
			needs = append(needs, n)
		}
	}
	return needs, nil
}

func (readFilesTool) Run(ctx context.Context, c *tool.Call, a *readFilesArgs) tool.Outcome {
	d := ReadFilesData{Files: []ReadFilesEntry{}, SkippedFiles: []SkippedFile{}}
	var out strings.Builder
	var origins []tool.Origin
	skip := func(p string, e *tool.Error) {
		d.SkippedFiles = append(d.SkippedFiles, SkippedFile{Path: p, Code: e.Code, Reason: e.Message})
	}
	for _, p := range a.FilePaths {
		if err := ctx.Err(); err != nil {
			skip(p, tool.Errorf(tool.CodeTimeout, "", "the call was cancelled before %s was read", fspath.Quote(p)))
			continue
		}
		header := "==> " + p + " <==\n"
		budget := int64(gate.MaxOutputBytes - out.Len() - len(header) - 1)
		data, abs, e := readPath(c, p, false, min(maxReadBytes, max(budget, 0)))
		if e != nil {
			if e.Code == tool.CodeTooLarge && budget < maxReadBytes {
				e = tool.Errorf(tool.CodeTooLarge, "read it alone with fs_read, or in a separate read_files call",
					"%s would take the output over 1 MiB (%d bytes left)", fspath.Quote(p), max(budget, 0))
			}
			skip(p, e)
			continue
		}
		out.WriteString(header)
		origins = append(origins, tool.Origin{Path: abs, Start: out.Len(), End: out.Len() + len(data)})
		out.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			out.WriteByte('\n')
		}
		d.Files = append(d.Files, ReadFilesEntry{Path: p, BytesRead: len(data)})
	}
	d.FilesReadCount = len(d.Files)
	o := tool.Outcome{Output: out.String(), Data: d, Origins: origins}
	if len(d.SkippedFiles) > 0 {
		o.Warnings = []string{fmt.Sprintf("skipped %d of %d files (see skipped_files)", len(d.SkippedFiles), len(a.FilePaths))}
	}
	return o
}
