package ops

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/wardenrt/warden/builtin/internal/fspath"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// ---- file access ----------------------------------------------------------
//
// A config file is reached in three steps, each checked:
//
//  1. The path is resolved (capability.ResolvePath) and the call's grants
//     must allow every need on the resolved path — again in Run, since the
//     path may resolve differently than when the gate checked it.
//  2. An os.Root is opened at the Base of a grant that allows the need and
//     whose base holds the file; inside it, an os.Root at the file's
//     directory. The real path of both (/proc/self/fd) must be what was
//     resolved: a directory swapped for a symlink in between is refused.
//  3. The file is opened by its bare name in that directory root, without
//     blocking (a FIFO cannot hang the call), and its descriptor checked: a
//     regular file, one hard link, real path as resolved.
//
// Writes go to a temporary file in the same directory root, then rename.

// opsTarget is a config file's directory, opened and verified for one call.
type opsTarget struct {
	path string   // resolved absolute path
	dir  *os.Root // root at filepath.Dir(path)
	name string   // base name in dir
}

func (t *opsTarget) Close() { t.dir.Close() }

// opsResolve resolves a config path for Needs and Run.
func opsResolve(ws, p string) (string, *tool.Error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", tool.Errorf(tool.CodeInvalidInput, "remove the NUL byte from the path", "path contains a NUL byte")
	}
	resolved, err := capability.ResolvePath(ws, p)
	for try := 0; err != nil && try < 3 && !errors.Is(err, capability.ErrSymlinkLoop) && !errors.Is(err, fs.ErrPermission); try++ {
		// A path changing under ResolvePath (a symlink replaced by a file
		// between lstat and readlink) fails with EINVAL: look again.
		resolved, err = capability.ResolvePath(ws, p)
	}
	switch {
	case errors.Is(err, capability.ErrSymlinkLoop):
		return "", tool.Errorf(tool.CodeInvalidInput, "fix the symbolic links on the path", "%s: too many levels of symbolic links", p)
	case errors.Is(err, fs.ErrPermission):
		return "", tool.Errorf(tool.CodeToolError, "warden's user cannot search a directory on the path", "%s: %v", p, err)
	case err != nil:
		return "", tool.Errorf(tool.CodeInvalidInput, "give a file path, absolute or relative to the workspace", "%s: %v", p, err)
	}
	return resolved, nil
}

// protected refuses writes to git internals (hooks and config run code)
// and to warden's own policy directory: no grant makes them writable
// through modify_config.
func protected(resolved, given string) *tool.Error {
	for _, p := range []string{resolved, given} {
		for _, el := range strings.Split(filepath.ToSlash(filepath.Clean(p)), "/") {
			if el == ".git" || el == ".warden" {
				return tool.Errorf(tool.CodePolicyDenied,
					"warden's tools never change .git internals (hooks and config run code) or a .warden policy directory; edit it yourself",
					"%s is inside a %s directory", given, el)
			}
		}
	}
	return nil
}

// denied is the CAPABILITY_DENIED error of a need the grants do not
// allow, naming the grant that would (if one can).
func denied(n capability.Need, workspace, format string, args ...any) *tool.Error {
	if g := n.Hint(workspace); g != "" {
		return tool.NeedsGrants([]string{g}, format, args...)
	}
	return tool.Errorf(tool.CodeCapabilityDenied, "", format, args...)
}

// open opens the directory of the file p names for a call that needs
// kinds (the first one chooses the grant whose base is opened).
func open(c *tool.Call, p string, kinds ...capability.Kind) (*opsTarget, *tool.Error) {
	resolved, rerr := opsResolve(c.Workspace, p)
	if rerr != nil {
		return nil, rerr
	}
	for _, k := range kinds {
		n := capability.Need{Kind: k, Resource: resolved}
		if !c.Grants.Allows(n) {
			return nil, denied(n, c.Workspace, "%s now resolves to %s, which the grants do not allow for %s", p, resolved, k)
		}
	}
	dirPath := filepath.Dir(resolved)
	if fi, err := os.Stat(resolved); (err == nil && fi.IsDir()) || dirPath == resolved {
		// Only for a clear message; the access itself is checked below.
		return nil, tool.Errorf(tool.CodeInvalidInput, "name a file; list directories with fs_list", "%s is a directory", p)
	}
	base := ""
	need := capability.Need{Kind: kinds[0], Resource: resolved}
	for _, g := range c.Grants.Grants() {
		if g.Kind() != kinds[0] {
			continue
		}
		b := g.Base(c.Workspace)
		if b == "" || !within(b, dirPath) || !capability.NewSet(c.Workspace, g).Allows(need) {
			continue
		}
		if len(b) > len(base) { // the narrowest root
			base = b
		}
	}
	if base == "" {
		return nil, denied(need, c.Workspace, "no single %s grant covers %s", kinds[0], resolved)
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return nil, fileErr(p, err)
	}
	defer root.Close()
	if err := checkReal(root, base); err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(base, dirPath)
	dir, err := root.OpenRoot(rel)
	if err != nil {
		return nil, fileErr(p, err)
	}
	if err := checkReal(dir, dirPath); err != nil {
		dir.Close()
		return nil, err
	}
	return &opsTarget{path: resolved, dir: dir, name: filepath.Base(resolved)}, nil
}

// within reports whether p is base or below it (both clean and absolute).
func within(base, p string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// checkReal checks that root is the directory want names.
func checkReal(root *os.Root, want string) *tool.Error {
	d, err := root.Open(".")
	if err != nil {
		return fileErr(want, err)
	}
	defer d.Close()
	if ok, err := isPath(d, want); err != nil {
		return fileErr(want, err)
	} else if !ok {
		return tool.Errorf(tool.CodePathEscape, "the directory was replaced while warden opened it; check for symbolic links and try again",
			"%s changed while it was opened", want)
	}
	return nil
}

// isPath reports whether the open file f is the file named want: its real
// path (from /proc/self/fd) equals want. Without /proc it compares the
// device and inode with want's.
func isPath(f *os.File, want string) (bool, error) {
	if real, err := fspath.RealPath(f); err == nil && real != "" {
		return real == want, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	wi, err := os.Lstat(want)
	if err != nil {
		return false, nil
	}
	return os.SameFile(fi, wi), nil
}

// fileErr maps a file system error to a canonical code.
func fileErr(p string, err error) *tool.Error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf(tool.CodeNotFound, "check the path; read_config reads existing files only", "%s does not exist", p)
	case errors.Is(err, fs.ErrPermission):
		return tool.Errorf(tool.CodeToolError, "warden's user lacks the file system permission; run warden as a user that may read it", "%s: permission denied", p)
	case errors.Is(err, syscall.ENOTDIR) || strings.HasSuffix(err.Error(), "not a directory"):
		return tool.Errorf(tool.CodeNotFound, "check the path: one of its directories is a file", "%s does not exist", p)
	case errors.Is(err, syscall.ELOOP):
		return tool.Errorf(tool.CodeInvalidInput, "fix the symbolic links on the path", "%s: too many levels of symbolic links", p)
	case strings.Contains(err.Error(), "escapes"):
		return tool.Errorf(tool.CodePathEscape, "the path leads out of the granted directory (a symbolic link?)", "%s: %v", p, err)
	}
	return tool.Errorf(tool.CodeToolError, "", "%s: %v", p, err)
}

// configFile is a config file as read for a call.
type configFile struct {
	data []byte
	info fs.FileInfo
}

// read opens and reads the file: a regular, text file with one hard link,
// at most maxConfigBytes, whose real path is the resolved one.
func (t *opsTarget) read(given string) (*configFile, *tool.Error) {
	f, err := t.dir.OpenFile(t.name, os.O_RDONLY|fspath.ONonblock|fspath.ONoctty, 0)
	if err != nil {
		return nil, fileErr(given, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileErr(given, err)
	}
	if fi.IsDir() {
		return nil, tool.Errorf(tool.CodeInvalidInput, "name a file; list directories with fs_list", "%s is a directory", given)
	}
	if !fi.Mode().IsRegular() {
		return nil, tool.Errorf(tool.CodeInvalidInput, "config files are regular files; this is a "+fileType(fi.Mode()),
			"%s is not a regular file (%s)", given, fileType(fi.Mode()))
	}
	if n := fspath.Nlink(fi); n > 1 {
		return nil, tool.Errorf(tool.CodePathEscape,
			"the file has other names (hard links), possibly outside the granted tree; warden does not use such files",
			"%s has %d hard links", given, n)
	}
	if ok, err := isPath(f, t.path); err != nil {
		return nil, fileErr(given, err)
	} else if !ok {
		return nil, tool.Errorf(tool.CodePathEscape, "the file was replaced while warden opened it; check for symbolic links and try again",
			"%s changed while it was opened", given)
	}
	if fi.Size() > maxConfigBytes {
		return nil, tooLarge(given, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fileErr(given, err)
	}
	if len(data) > maxConfigBytes {
		return nil, tooLarge(given, int64(len(data)))
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, tool.Errorf(tool.CodeNotText, "read_config and modify_config handle UTF-8 text files only",
			"%s is not text (it holds NUL bytes or invalid UTF-8)", given)
	}
	return &configFile{data: data, info: fi}, nil
}

func tooLarge(p string, n int64) *tool.Error {
	return tool.Errorf(tool.CodeTooLarge, fmt.Sprintf("config files up to %d KiB are handled; read parts of larger files with fs_read", maxConfigBytes>>10),
		"%s is %d bytes; the limit is %d", p, n, maxConfigBytes)
}

func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

// ---- read_config ----------------------------------------------------------

type readConfig struct{ o *Config }

// pathArgs are read_config's arguments.
type pathArgs struct {
	Path string `json:"path" minLength:"1" maxLength:"4096" jsonschema:"the config file: absolute (/etc/nginx/nginx.conf) or relative to the workspace"`
}

// ConfigFile is read_config's data.
type ConfigFile struct {
	Path    string `json:"path"` // resolved, absolute
	Content string `json:"content"`
	Bytes   int    `json:"bytes"`
	Lines   int    `json:"lines"`
	Mode    string `json:"mode"`   // e.g. "0644"
	SHA256  string `json:"sha256"` // of the content, "sha256:<hex>"
}

func (t *readConfig) Spec() tool.Spec {
	return tool.Spec{
		Name: "read_config",
		Description: "Read a configuration file (UTF-8 text, up to 1 MiB), absolute (/etc/nginx/nginx.conf) or relative to the workspace. " +
			"The output numbers the lines, as modify_config's changes refer to them; data.content is the exact text. Needs fs.read on the file.",
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

func (t *readConfig) Needs(c *tool.Call, a *pathArgs) ([]capability.Need, error) {
	resolved, err := opsResolve(c.Workspace, a.Path)
	if err != nil {
		return nil, err
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: resolved}}, nil
}

func (t *readConfig) Run(ctx context.Context, c *tool.Call, a *pathArgs) tool.Outcome {
	tg, err := open(c, a.Path, capability.FSRead)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	defer tg.Close()
	f, err := tg.read(a.Path)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	lines, _ := splitLines(string(f.data))
	sum := sha256.Sum256(f.data)
	data := ConfigFile{
		Path: tg.path, Content: string(f.data), Bytes: len(f.data), Lines: len(lines),
		Mode: fmt.Sprintf("%04o", f.info.Mode().Perm()), SHA256: "sha256:" + hex.EncodeToString(sum[:]),
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, %s, mode %s)\n", tg.path, plural(len(lines), "line", "lines"), plural(len(f.data), "byte", "bytes"), data.Mode)
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, strings.TrimSuffix(l, "\r"))
	}
	return tool.Outcome{Output: b.String(), Data: data, Origins: []tool.Origin{{Path: tg.path}}}
}

// splitLines splits text into lines without their "\n"; final reports
// whether the text ends with a newline. Empty text has no lines.
func splitLines(s string) (lines []string, final bool) {
	if s == "" {
		return nil, true
	}
	final = strings.HasSuffix(s, "\n")
	lines = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines, final
}

// ---- modify_config --------------------------------------------------------

type modifyConfig struct{ o *Config }

// ConfigChange is one line replacement.
type ConfigChange struct {
	Line int    `json:"line" minimum:"1" maximum:"10000000" jsonschema:"1-based line number"`
	Old  string `json:"old" maxLength:"65536" jsonschema:"the line's current text, exactly (without the newline); the change is refused if it differs"`
	New  string `json:"new" maxLength:"65536" jsonschema:"the text that replaces the line; \\n in it makes several lines"`
}

// modifyArgs are modify_config's arguments.
type modifyArgs struct {
	Path    string         `json:"path" minLength:"1" maxLength:"4096" jsonschema:"the config file: absolute (/etc/nginx/nginx.conf) or relative to the workspace"`
	Changes []ConfigChange `json:"changes" minItems:"1" maxItems:"1000" jsonschema:"line replacements, all applied or none; line numbers refer to the file as it is now (read it with read_config)"`
}

// ConfigEdit is modify_config's data (and its preview's).
type ConfigEdit struct {
	Path string `json:"path"` // resolved, absolute
	// Artifact is the digest the old version is (or, in a dry run, would be)
	// kept under.
	Artifact string `json:"artifact"`
	// ArtifactRedacted is set when the old version held secrets, which were
	// masked before it was kept: the artifact is then not a byte-exact copy.
	ArtifactRedacted bool   `json:"artifact_redacted"`
	Diff             string `json:"diff"`
	ChangedLines     []int  `json:"changed_lines"`
	Mode             string `json:"mode"`
	Bytes            int    `json:"bytes"` // size after the change
	Written          bool   `json:"written"`
}

func (t *modifyConfig) Spec() tool.Spec {
	return tool.Spec{
		Name: "modify_config",
		Description: "Change lines of a configuration file: each change {line, old, new} replaces line `line` if it currently reads `old` exactly, " +
			"else nothing is written (PATCH_REJECTED: re-read the file with read_config). All changes or none. The dry run shows the unified diff. " +
			"The write is atomic and keeps the file's mode; the old version is kept as an artifact (data.artifact). " +
			"Files with several hard links, special files, binary files and .git/.warden internals are refused. Needs fs.read and fs.write on the file.",
		Capabilities: []capability.Kind{capability.FSRead, capability.FSWrite},
	}
}

// check validates the changes: at least one, one per line, each old
// text one line, no NUL bytes.
func (t *modifyConfig) check(a *modifyArgs) *tool.Error {
	if len(a.Changes) == 0 {
		return tool.Errorf(tool.CodeInvalidInput, "give at least one change", "no changes")
	}
	seen := map[int]bool{}
	for i, ch := range a.Changes {
		switch {
		case ch.Line < 1:
			return tool.Errorf(tool.CodeInvalidInput, "lines are numbered from 1", "changes[%d]: line %d", i, ch.Line)
		case seen[ch.Line]:
			return tool.Errorf(tool.CodeInvalidInput, "give one change per line; put several lines in new with \\n",
				"changes[%d]: line %d is changed twice", i, ch.Line)
		case strings.ContainsAny(ch.Old, "\n"):
			return tool.Errorf(tool.CodeInvalidInput, "old is one line: its text without the newline",
				"changes[%d]: old holds a newline", i)
		case strings.IndexByte(ch.Old, 0) >= 0 || strings.IndexByte(ch.New, 0) >= 0:
			return tool.Errorf(tool.CodeInvalidInput, "config files are text: remove the NUL byte", "changes[%d] holds a NUL byte", i)
		}
		seen[ch.Line] = true
	}
	return nil
}

// Sinks: each change's new text lands in the file, and its old text is
// compared with the file's line (one line: no newline).
func (t *modifyConfig) Sinks(c *tool.Call, a *modifyArgs) ([]tool.Sink, error) {
	if err := t.check(a); err != nil {
		return nil, err
	}
	resolved, err := opsResolve(c.Workspace, a.Path)
	if err != nil {
		return nil, err
	}
	var sinks []tool.Sink
	for i, ch := range a.Changes {
		sinks = append(sinks,
			tool.Sink{Arg: fmt.Sprintf("/changes/%d/old", i), End: len(ch.Old), Path: resolved, Forbid: "\n"},
			tool.Sink{Arg: fmt.Sprintf("/changes/%d/new", i), End: len(ch.New), Path: resolved})
	}
	return sinks, nil
}

func (t *modifyConfig) Needs(c *tool.Call, a *modifyArgs) ([]capability.Need, error) {
	if err := t.check(a); err != nil {
		return nil, err
	}
	resolved, err := opsResolve(c.Workspace, a.Path)
	if err != nil {
		return nil, err
	}
	if err := protected(resolved, a.Path); err != nil {
		return nil, err
	}
	return []capability.Need{
		{Kind: capability.FSRead, Resource: resolved},
		{Kind: capability.FSWrite, Resource: resolved},
	}, nil
}

// edit is a checked, computed modification.
type edit struct {
	tg       *opsTarget
	file     *configFile
	newData  []byte
	old      []byte // the old version as it will be kept (redacted)
	data     ConfigEdit
	warnings []string
}

// prepare opens and reads the file, checks every change against it and
// computes the new content, the diff and the artifact; it changes nothing.
func (t *modifyConfig) prepare(c *tool.Call, a *modifyArgs) (*edit, *tool.Error) {
	if err := t.check(a); err != nil {
		return nil, err
	}
	tg, err := open(c, a.Path, capability.FSWrite, capability.FSRead)
	if err != nil {
		return nil, err
	}
	if err := protected(tg.path, a.Path); err != nil {
		tg.Close()
		return nil, err
	}
	f, err := tg.read(a.Path)
	if err != nil {
		tg.Close()
		return nil, err
	}
	lines, final := splitLines(string(f.data))
	var stale []string
	repl := map[int][]string{}
	for _, ch := range a.Changes {
		i := ch.Line - 1
		if i >= len(lines) {
			stale = append(stale, fmt.Sprintf("line %d: the file has only %s", ch.Line, plural(len(lines), "line", "lines")))
			continue
		}
		cur := lines[i]
		cr := strings.HasSuffix(cur, "\r")
		if cur != ch.Old && !(cr && strings.TrimSuffix(cur, "\r") == ch.Old) {
			stale = append(stale, fmt.Sprintf("line %d reads %q, not %q", ch.Line, strings.TrimSuffix(cur, "\r"), ch.Old))
			continue
		}
		news := strings.Split(ch.New, "\n")
		if cr { // keep the file's CRLF line ends
			for j, n := range news {
				if !strings.HasSuffix(n, "\r") {
					news[j] = n + "\r"
				}
			}
		}
		if len(news) == 1 && news[0] == cur {
			continue // no change
		}
		repl[i] = news
	}
	if len(stale) > 0 {
		tg.Close()
		return nil, tool.Errorf(tool.CodePatchRejected,
			"the file is not what the changes expect: read it again with read_config and base the changes on its current lines",
			"%s: %s refused, nothing was written: %s", a.Path, plural(len(stale), "change", "changes"), strings.Join(stale, "; "))
	}

	e := &edit{tg: tg, file: f}
	e.data = ConfigEdit{Path: tg.path, ChangedLines: []int{}, Mode: fmt.Sprintf("%04o", f.info.Mode().Perm())}
	idx := make([]int, 0, len(repl))
	for i := range repl {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		e.data.ChangedLines = append(e.data.ChangedLines, i+1)
	}
	var nb strings.Builder
	for i, l := range lines {
		if r, ok := repl[i]; ok {
			nb.WriteString(strings.Join(r, "\n"))
		} else {
			nb.WriteString(l)
		}
		if i < len(lines)-1 || final {
			nb.WriteByte('\n')
		}
	}
	e.newData = []byte(nb.String())
	e.data.Bytes = len(e.newData)
	e.data.Diff = unifiedDiff(tg.path, lines, final, repl, idx)

	red := t.o.redactor().String(string(f.data))
	e.old = []byte(red)
	e.data.ArtifactRedacted = red != string(f.data)
	sum := sha256.Sum256(e.old)
	e.data.Artifact = "sha256:" + hex.EncodeToString(sum[:])
	if e.data.ArtifactRedacted {
		e.warnings = append(e.warnings, "the old version holds secrets, which are masked in the kept artifact: it is not a byte-exact copy")
	}
	if len(idx) == 0 {
		e.warnings = append(e.warnings, "every change matches the current text already: nothing to write")
	}
	if t.o.Artifacts == nil {
		e.warnings = append(e.warnings, "no artifact store is configured: the change cannot be made, since the old version could not be kept")
	}
	return e, nil
}

func (t *modifyConfig) Preview(ctx context.Context, c *tool.Call, a *modifyArgs) tool.Outcome {
	e, err := t.prepare(c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	defer e.tg.Close()
	var out string
	if len(e.data.ChangedLines) == 0 {
		out = fmt.Sprintf("would leave %s unchanged", e.data.Path)
	} else {
		out = fmt.Sprintf("would change %s of %s (%s; %d bytes, mode %s kept), written atomically; the old version would be kept as artifact %s\n%s",
			plural(len(e.data.ChangedLines), "line", "lines"), e.data.Path, lineList(e.data.ChangedLines),
			e.data.Bytes, e.data.Mode, e.data.Artifact, e.data.Diff)
	}
	return tool.Outcome{Output: out, Data: e.data, Warnings: e.warnings}
}

func (t *modifyConfig) Run(ctx context.Context, c *tool.Call, a *modifyArgs) tool.Outcome {
	e, err := t.prepare(c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	defer e.tg.Close()
	if len(e.data.ChangedLines) == 0 {
		e.data.Artifact = ""
		return tool.Outcome{Output: fmt.Sprintf("%s already reads as asked; nothing was written", e.data.Path), Data: e.data, Warnings: e.warnings}
	}
	if t.o.Artifacts == nil {
		return tool.Fail(tool.CodeToolError, "warden was started without an artifact store; this is a configuration error in warden",
			"modify_config keeps the old version of every file it changes, and no artifact store is configured; nothing was written")
	}
	digest, aerr := t.o.Artifacts.PutArtifact(ctx, e.old)
	if aerr != nil {
		return tool.Fail(tool.CodeToolError, "the store could not keep the old version; try again", "keeping the old version of %s failed, nothing was written: %v", e.data.Path, aerr)
	}
	e.data.Artifact = digest
	warnings := e.warnings
	if w, werr := e.write(); werr != nil {
		return tool.Outcome{Err: werr}
	} else if w != "" {
		warnings = append(warnings, w)
	}
	e.data.Written = true
	out := fmt.Sprintf("changed %s of %s (%s); the old version is kept as artifact %s\n%s",
		plural(len(e.data.ChangedLines), "line", "lines"), e.data.Path, lineList(e.data.ChangedLines), digest, e.data.Diff)
	return tool.Outcome{Output: out, Data: e.data, Warnings: warnings}
}

// write replaces the file atomically: a temporary file in the same directory
// (through the same root) with the old mode and owner, synced, renamed over
// the file, and the directory synced. It refuses if the file changed since
// it was read. It returns a warning when the owner could not be kept.
func (e *edit) write() (string, *tool.Error) {
	fi := e.file.info
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + e.tg.name + ".warden-" + hex.EncodeToString(rnd[:]) + ".tmp"
	if len(tmp) > 255 {
		tmp = ".warden-" + hex.EncodeToString(rnd[:]) + ".tmp"
	}
	f, err := e.tg.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fileErr(e.data.Path, err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = e.tg.dir.Remove(tmp)
		}
	}()
	warning := ""
	if uid, gid, ok := fspath.Owner(fi); ok && (uid != os.Getuid() || gid != os.Getgid()) {
		if err := f.Chown(uid, gid); err != nil {
			warning = fmt.Sprintf("the file's owner (%d:%d) could not be kept: it now belongs to warden's user (%v)", uid, gid, err)
		}
	}
	if _, err := f.Write(e.newData); err != nil {
		return "", fileErr(e.data.Path, err)
	}
	if err := f.Chmod(fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return "", fileErr(e.data.Path, err)
	}
	if err := f.Sync(); err != nil {
		return "", fileErr(e.data.Path, err)
	}
	if err := f.Close(); err != nil {
		return "", fileErr(e.data.Path, err)
	}
	cur, err := e.tg.dir.Lstat(e.tg.name)
	if err != nil || !os.SameFile(cur, fi) || !cur.ModTime().Equal(fi.ModTime()) || cur.Size() != fi.Size() {
		done = true
		_ = e.tg.dir.Remove(tmp)
		return "", tool.Errorf(tool.CodePatchRejected, "someone else changed the file meanwhile: read it again with read_config",
			"%s changed while it was being modified; nothing was written", e.data.Path)
	}
	if err := e.tg.dir.Rename(tmp, e.tg.name); err != nil {
		done = true
		_ = e.tg.dir.Remove(tmp)
		return "", fileErr(e.data.Path, err)
	}
	done = true
	if d, err := e.tg.dir.Open("."); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return warning, nil
}

func lineList(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = strconv.Itoa(l)
	}
	if len(ls) == 1 {
		return "line " + s[0]
	}
	return "lines " + strings.Join(s, ", ")
}

// unifiedDiff renders the replacements repl (0-based line → new lines,
// at the sorted indexes idx) of lines as a unified diff with three lines of
// context, as diff -u and git apply read it.
func unifiedDiff(path string, lines []string, final bool, repl map[int][]string, idx []int) string {
	if len(idx) == 0 {
		return ""
	}
	const context = 3
	n := len(lines)
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", path, path)
	noEOL := func(i int) {
		if i == n-1 && !final {
			b.WriteString("\\ No newline at end of file\n")
		}
	}
	delta := 0
	for g := 0; g < len(idx); {
		// A hunk takes every change whose context touches the previous one's.
		h := g + 1
		for h < len(idx) && idx[h]-idx[h-1] <= 2*context {
			h++
		}
		s := max(0, idx[g]-context)
		e := min(n, idx[h-1]+1+context)
		oldCount := e - s
		newCount := oldCount
		for _, i := range idx[g:h] {
			newCount += len(repl[i]) - 1
		}
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", s+1, oldCount, s+1+delta, newCount)
		for i := s; i < e; i++ {
			r, ok := repl[i]
			if !ok {
				b.WriteString(" " + lines[i] + "\n")
				noEOL(i)
				continue
			}
			b.WriteString("-" + lines[i] + "\n")
			noEOL(i)
			for _, l := range r {
				b.WriteString("+" + l + "\n")
			}
			noEOL(i)
		}
		delta += newCount - oldCount
		g = h
	}
	return b.String()
}
