// Package memory is the memory family: write_memory, query_memory,
// get_context, prime_context and clear_context over warden's memory, and
// the index of the workspace's text files get_context searches.
package memory

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/builtin/internal/fspath"
	"github.com/wardenrt/warden/builtin/internal/textutil"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/pathrule"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
)

// The memory family: write_memory and query_memory over the
// owner's namespaced notes, get_context over an index of the workspace's
// text files, and prime_context / clear_context for the per-run context the
// agent loop puts into the prompt. All of it lives in gate.Memory (the
// store, adapted by cmd).
//
// Namespaces. User namespaces are 1-128 bytes of letters, digits, '.', '_',
// '-' and '/', starting with a letter or digit; "default" when none is given.
// Namespaces starting with "_" are warden's own and unreachable through
// write_memory and query_memory, whatever the memory grants say:
//
//	_files/<ws>        get_context's index: key = workspace-relative path,
//	                   value = "path: <rel>\n\n" + the file's text (capped,
//	                   secrets masked); <ws> = 16 hex digits of sha256 of the
//	                   workspace path, so two workspaces never mix
//	_files_state/<ws>  per file: size, mtime, sha256 (incremental refresh)
//	_context/<run>     the run's primed context (prime_context/clear_context)
//
// The index holds file contents, so it is guarded by fs.read grants, not by
// memory grants: memory.read:* must not become a way around fs.read.
//
// Capabilities, computed before anything runs:
//
//	write_memory   memory.write:<ns>
//	query_memory   with a literal namespace: memory.read:<ns>. With a glob or
//	               no namespace, the namespaces searched depend on what is
//	               stored, which Needs cannot see; so there is no static need
//	               and the search itself is filtered: only namespaces the
//	               call's grants allow (Grants.Allows(memory.read:<ns>)) are
//	               searched. Treating the glob as a need would be unsound
//	               (a grant memory.read:a? matches the literal text "a*" but
//	               not the namespace "abc" that "a*" selects) and would give a
//	               hint with the glob mangled. When namespaces matched but
//	               none may be read the call fails with CAPABILITY_DENIED; when
//	               some were left out a warning says how many.
//	get_context    fs.read of each target file; every file it returns is
//	               checked against the call's fs.read grants (files the grants
//	               do not allow are left out and counted). No memory grant.
//	prime_context  fs.read of each file; the run's own context namespace
//	               needs no memory grant (it is warden's, like the transcript).
//	clear_context  nothing (it only empties the calling run's context).
//
// Secrets. The gate redacts the audit copy of the arguments, but values go
// to the database directly, so every stored value (notes, file text, primed
// context) is run through redact first; keys and namespaces that hold a
// secret are refused.

// Config configures the memory family.
type Config struct {
	// Memory is where the entries are kept (the store).
	Memory gate.Memory
}

// Tools returns the memory family: write_memory, query_memory,
// get_context, prime_context and clear_context, over cfg.Memory.
func Tools(cfg Config) []tool.Tool {
	mem := cfg.Memory
	return []tool.Tool{
		tool.Adapt[writeArgs](&writeTool{mem}),
		tool.Adapt[queryArgs](&queryTool{mem}),
		tool.Adapt[getContextArgs](&getContextTool{mem}),
		tool.Adapt[primeArgs](&primeTool{mem}),
		tool.Adapt[clearArgs](&clearTool{mem}),
	}
}

// Limits and names of the memory family.
const (
	defaultNS      = "default"
	maxNSBytes     = 128
	maxKeyBytes    = 256
	maxValueBytes  = 256 << 10
	defaultLimit   = 10
	filesPrefix    = "_files/"
	statePrefix    = "_files_state/"
	contextPrefix  = "_context/"
	cliRun         = "cli"
	historyTail    = 2000
	contextResults = 10
	primeMaxFile   = 64 << 10
	primeMaxText   = 256 << 10
	snippetBytes   = 200
)

// ------------------------------------------------------------- namespaces

// checkNS validates a user namespace (literal, not reserved).
func checkNS(ns string) *tool.Error {
	const hint = "use 1-128 letters, digits, '.', '_', '-' and '/' starting with a letter or digit (e.g. notes or project/todo)"
	switch {
	case strings.HasPrefix(ns, "_"):
		return tool.Errorf(tool.CodeInvalidInput, "namespaces starting with _ are warden's own; choose another",
			"namespace %q is reserved", ns)
	case ns == "" || len(ns) > maxNSBytes:
		return tool.Errorf(tool.CodeInvalidInput, hint, "namespace must be 1-%d bytes", maxNSBytes)
	}
	for i, r := range ns {
		ok := r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-/", r))
		if !ok || (i == 0 && !unicode.IsLetter(r) && !unicode.IsDigit(r)) {
			return tool.Errorf(tool.CodeInvalidInput, hint, "namespace %q has an invalid character at byte %d", textutil.Show(ns, false), i)
		}
	}
	if strings.Contains(ns, "//") || strings.HasSuffix(ns, "/") || strings.Contains(ns, "/.") {
		return tool.Errorf(tool.CodeInvalidInput, hint, "namespace %q has an empty or dot segment", ns)
	}
	if redact.Contains(ns) {
		return tool.Errorf(tool.CodeInvalidInput, "choose a namespace that is not a secret", "the namespace looks like a secret")
	}
	return nil
}

// isGlob reports whether a namespace argument is a glob.
func isGlob(s string) bool { return strings.ContainsAny(s, "*?[]{}") }

// checkGlob validates a namespace glob.
func checkGlob(g string) *tool.Error {
	if strings.HasPrefix(g, "_") {
		return tool.Errorf(tool.CodeInvalidInput, "namespaces starting with _ are warden's own; get_context searches the workspace index",
			"namespace pattern %q names reserved namespaces", g)
	}
	if len(g) > maxNSBytes || strings.ContainsFunc(g, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\\' }) ||
		!doublestar.ValidatePattern(g) {
		return tool.Errorf(tool.CodeInvalidInput, "write a glob such as notes/* or project/**", "invalid namespace pattern %q", textutil.Show(g, false))
	}
	return nil
}

// checkKey validates a key.
func checkKey(key string) *tool.Error {
	switch {
	case key == "" || len(key) > maxKeyBytes:
		return tool.Errorf(tool.CodeInvalidInput, "use a key of 1-256 bytes", "key must be 1-%d bytes", maxKeyBytes)
	case !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }):
		return tool.Errorf(tool.CodeInvalidInput, "use printable text for the key", "key holds control characters or invalid UTF-8")
	case redact.Contains(key):
		return tool.Errorf(tool.CodeInvalidInput, "choose a key that is not a secret (values are redacted, keys are not)", "the key looks like a secret")
	}
	return nil
}

// workspaceID names a workspace's index namespaces.
func workspaceID(ws string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(ws)))
	return hex.EncodeToString(sum[:8])
}

func filesNS(ws string) (text, state string) {
	id := workspaceID(ws)
	return filesPrefix + id, statePrefix + id
}

// contextNS is the namespace of a run's primed context.
func contextNS(runID string) string { return gate.ContextNamespace(runID) }

// storeErr turns a Memory failure into a result.
func storeErr(op string, err error) *tool.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return tool.Errorf(tool.CodeTimeout, "retry with more time", "%s: %v", op, err)
	}
	return tool.Errorf(tool.CodeToolError, "check the store with `warden memory ls`; another warden may hold it", "%s: %v", op, err)
}

func noStore() *tool.Error {
	return tool.Errorf(tool.CodeToolError, "this warden was built without a memory store", "memory is not available")
}

// oneLine shortens a value to one line for Output.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	return textutil.Clip(textutil.Show(s, false), n)
}

// ------------------------------------------------------------ write_memory

type writeTool struct{ mem gate.Memory }

var (
	_ tool.Typed[writeArgs]          = (*writeTool)(nil)
	_ tool.TypedPreviewer[writeArgs] = (*writeTool)(nil)
)

func (t *writeTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "write_memory",
		Description: "Store a text entry in warden's memory under namespace/key, replacing an existing entry (with a warning). " +
			"Secrets in the value are masked before it is stored. Needs memory.write:<namespace>.",
		Capabilities: []capability.Kind{capability.MemoryWrite},
	}
}

// writeArgs are write_memory's arguments; their schema is its input
// schema.
type writeArgs struct {
	Key       string  `json:"key" minLength:"1" maxLength:"256" jsonschema:"The entry's key within its namespace."`
	Value     string  `json:"value" jsonschema:"The text to remember (at most 256 KiB; secrets are masked before it is stored)."`
	Namespace *string `json:"namespace,omitempty" maxLength:"128" jsonschema:"Namespace, e.g. notes or project/todo (default \"default\"). Names starting with _ are reserved."`
}

// check validates the arguments and returns the namespace.
func (a *writeArgs) check() (string, *tool.Error) {
	ns := defaultNS
	if a.Namespace != nil {
		ns = *a.Namespace
	}
	if err := checkNS(ns); err != nil {
		return "", err
	}
	if err := checkKey(a.Key); err != nil {
		return "", err
	}
	if len(a.Value) > maxValueBytes {
		return "", tool.Errorf(tool.CodeTooLarge, "store at most 256 KiB per entry; split it over several keys",
			"value is %d bytes; the limit is %d", len(a.Value), maxValueBytes)
	}
	return ns, nil
}

// Needs implements tool.Typed: memory.write of the namespace.
func (t *writeTool) Needs(_ *tool.Call, a *writeArgs) ([]capability.Need, error) {
	ns, err := a.check()
	if err != nil {
		return nil, err
	}
	return []capability.Need{{Kind: capability.MemoryWrite, Resource: ns}}, nil
}

// WriteResult is write_memory's data.
type WriteResult struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Bytes     int    `json:"bytes"`
	// Overwrote is true when an entry was (or, in a preview, would be)
	// replaced.
	Overwrote bool `json:"overwrote"`
	// Redacted is true when secrets were masked in the stored value.
	Redacted bool `json:"redacted"`
}

func (t *writeTool) prepare(ctx context.Context, a *writeArgs) (WriteResult, string, []string, *tool.Error) {
	ns, err := a.check()
	if err != nil {
		return WriteResult{}, "", nil, err
	}
	if t.mem == nil {
		return WriteResult{}, "", nil, noStore()
	}
	value := redact.String(a.Value)
	r := WriteResult{Namespace: ns, Key: a.Key, Bytes: len(value), Redacted: value != a.Value}
	_, gerr := t.mem.GetMemory(ctx, ns, a.Key)
	switch {
	case gerr == nil:
		r.Overwrote = true
	case !errors.Is(gerr, gate.ErrNotFound):
		return r, "", nil, storeErr("write_memory", gerr)
	}
	var warnings []string
	if r.Overwrote {
		warnings = append(warnings, fmt.Sprintf("overwrites the existing entry %s/%s", ns, a.Key))
	}
	if r.Redacted {
		warnings = append(warnings, "secrets in the value were masked before storing it")
	}
	return r, value, warnings, nil
}

// Preview implements tool.TypedPreviewer: it says what would be stored
// and whether an entry would be replaced (not the old value, which needs
// memory.read).
func (t *writeTool) Preview(ctx context.Context, _ *tool.Call, a *writeArgs) tool.Outcome {
	r, _, warnings, err := t.prepare(ctx, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	verb := "create"
	if r.Overwrote {
		verb = "replace"
	}
	return tool.Outcome{Output: fmt.Sprintf("would %s memory entry %s/%s (%d bytes)", verb, r.Namespace, r.Key, r.Bytes), Data: r, Warnings: warnings}
}

func (t *writeTool) Run(ctx context.Context, _ *tool.Call, a *writeArgs) tool.Outcome {
	r, value, warnings, err := t.prepare(ctx, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	if perr := t.mem.PutMemory(ctx, r.Namespace, r.Key, value); perr != nil {
		return tool.Outcome{Err: storeErr("write_memory", perr)}
	}
	return tool.Outcome{Output: fmt.Sprintf("stored %s/%s (%d bytes)", r.Namespace, r.Key, r.Bytes), Data: r, Warnings: warnings}
}

// ------------------------------------------------------------ query_memory

type queryTool struct{ mem gate.Memory }

var _ tool.Typed[queryArgs] = (*queryTool)(nil)

func (t *queryTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "query_memory",
		Description: "Search warden's memory and return the entries most relevant to the query, best first. A namespace narrows the " +
			"search; a glob or no namespace searches every matching namespace the grants allow reading. Needs memory.read:<namespace>.",
		Capabilities: []capability.Kind{capability.MemoryRead},
		ReadOnly:     true,
	}
}

// queryArgs are query_memory's arguments; their schema is its input
// schema.
type queryArgs struct {
	Query     string  `json:"query" minLength:"1" maxLength:"4096" jsonschema:"Words to search for (ranked by BM25 relevance)."`
	Namespace *string `json:"namespace,omitempty" maxLength:"128" jsonschema:"A namespace (notes) or a glob (project/*, **). Default: every namespace the grants allow reading."`
	Limit     *int    `json:"limit,omitempty" minimum:"1" maximum:"100" jsonschema:"Maximum number of results (default 10)."`
}

// check validates the query and the namespace (a name or a glob).
func (a *queryArgs) check() *tool.Error {
	if strings.TrimSpace(a.Query) == "" {
		return tool.Errorf(tool.CodeInvalidInput, "say what to search for", "query is empty")
	}
	if a.Namespace != nil {
		if isGlob(*a.Namespace) {
			return checkGlob(*a.Namespace)
		}
		return checkNS(*a.Namespace)
	}
	return nil
}

// Needs implements tool.Typed: memory.read of a literal namespace; for a
// glob or no namespace, nothing static (the search is filtered by grants).
func (t *queryTool) Needs(_ *tool.Call, a *queryArgs) ([]capability.Need, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if a.Namespace != nil && !isGlob(*a.Namespace) {
		return []capability.Need{{Kind: capability.MemoryRead, Resource: *a.Namespace}}, nil
	}
	return nil, nil
}

// QueryResult is query_memory's data.
type QueryResult struct {
	Query   string     `json:"query"`
	Scope   string     `json:"scope"`
	Results []QueryHit `json:"results"`
	Count   int        `json:"count"`
	// Searched lists the namespaces searched (those the grants allow).
	Searched []string `json:"namespaces_searched"`
	// Hidden counts matching namespaces the grants do not allow reading.
	Hidden int `json:"namespaces_hidden"`
}

// QueryHit is one result.
type QueryHit struct {
	Namespace string    `json:"namespace"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Score     float64   `json:"score"`
	Updated   time.Time `json:"updated"`
}

func (t *queryTool) Run(ctx context.Context, c *tool.Call, a *queryArgs) tool.Outcome {
	if err := a.check(); err != nil {
		return tool.Outcome{Err: err}
	}
	if t.mem == nil {
		return tool.Outcome{Err: noStore()}
	}
	limit := defaultLimit
	if a.Limit != nil {
		limit = *a.Limit
	}
	scope := "**"
	if a.Namespace != nil {
		scope = *a.Namespace
	}
	literal := a.Namespace != nil && !isGlob(scope)
	var (
		mu       sync.Mutex
		searched = map[string]bool{}
		hidden   = map[string]bool{}
	)
	filter := func(ns string) bool {
		if strings.HasPrefix(ns, "_") {
			return false // warden's own: never through query_memory
		}
		match := ns == scope
		if !literal {
			match, _ = doublestar.Match(scope, ns)
		}
		if !match {
			return false
		}
		allowed := c.Grants.Allows(capability.Need{Kind: capability.MemoryRead, Resource: ns})
		mu.Lock()
		defer mu.Unlock()
		if allowed {
			searched[ns] = true
		} else {
			hidden[ns] = true
		}
		return allowed
	}
	hits, serr := t.mem.SearchMemory(ctx, a.Query, filter, limit)
	if serr != nil {
		return tool.Outcome{Err: storeErr("query_memory", serr)}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(searched) == 0 && len(hidden) > 0 {
		return tool.Fail(tool.CodeCapabilityDenied, "needs a memory.read:<namespace> grant for each namespace to search",
			"query_memory: %d namespace(s) match %q and the grants (%s) allow reading none of them", len(hidden), scope, c.Grants.String())
	}
	r := QueryResult{Query: a.Query, Scope: scope, Results: []QueryHit{}, Searched: []string{}, Hidden: len(hidden)}
	for ns := range searched {
		r.Searched = append(r.Searched, ns)
	}
	slices.Sort(r.Searched)
	var b strings.Builder
	for i, h := range hits {
		if !searched[h.Namespace] { // a store that ignored the filter
			continue
		}
		r.Results = append(r.Results, QueryHit{Namespace: h.Namespace, Key: h.Key, Value: h.Value, Score: h.Score, Updated: h.Updated})
		fmt.Fprintf(&b, "\n%d. %s/%s (score %.2f): %s", i+1, h.Namespace, h.Key, h.Score, oneLine(h.Value, snippetBytes))
	}
	r.Count = len(r.Results)
	var warnings []string
	if len(hidden) > 0 {
		warnings = append(warnings, fmt.Sprintf("%d namespace(s) matching %q were not searched: the grants do not allow reading them", len(hidden), scope))
	}
	out := fmt.Sprintf("%d result(s) for %q in %s", r.Count, oneLine(a.Query, 200), scope) + b.String()
	return tool.Outcome{Output: out, Data: r, Warnings: warnings}
}

// ---------------------------------------------------------- file access

// workspacePath resolves a user path to (absolute resolved path,
// workspace-relative slash path). Paths that leave the workspace, through
// "..", an absolute path or a symlink, are PATH_ESCAPE.
func workspacePath(ws, p string) (string, string, *tool.Error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", "", tool.Errorf(tool.CodeInvalidInput, "give a file path relative to the workspace", "invalid path %q", textutil.Show(p, false))
	}
	abs, err := capability.ResolvePath(ws, p)
	if err != nil {
		return "", "", tool.Errorf(tool.CodeInvalidInput, "give a path without symlink loops", "path %q: %v", textutil.Show(p, false), err)
	}
	rel, err := filepath.Rel(ws, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", "", tool.Errorf(tool.CodePathEscape, "name a file inside the workspace "+ws,
			"%q is outside the workspace (it resolves to %s)", textutil.Show(p, false), abs)
	}
	if rel == "." {
		return "", "", tool.Errorf(tool.CodeInvalidInput, "name a file, not the workspace", "%q is the workspace itself", textutil.Show(p, false))
	}
	return abs, filepath.ToSlash(rel), nil
}

// readFile reads up to max bytes of the workspace file rel through an
// os.Root on ws (which no symlink or race can leave), refuses anything but a
// regular file (opened non-blocking, so a FIFO cannot hang it), and, when
// c is non-nil, checks the file actually opened against the call's fs.read
// grants and the policy's hide: list: its path is read back from the open
// descriptor, so a symlink swapped in after the gate's check is caught.
func readFile(root *os.Root, rel string, c *tool.Call, max int) ([]byte, bool, *tool.Error) {
	f, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|fspath.ONonblock|fspath.ONoctty, 0)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, false, tool.Errorf(tool.CodeNotFound, "check the path with fs_list or fs_glob", "%s does not exist", rel)
		case strings.Contains(err.Error(), "escapes from parent"):
			return nil, false, tool.Errorf(tool.CodePathEscape, "name a file inside the workspace", "%s leads outside the workspace", rel)
		}
		return nil, false, tool.Errorf(tool.CodeToolError, "", "open %s: %v", rel, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, false, tool.Errorf(tool.CodeToolError, "", "stat %s: %v", rel, err)
	}
	if !info.Mode().IsRegular() {
		return nil, false, tool.Errorf(tool.CodeNotText, "name a regular text file", "%s is not a regular file (%s)", rel, info.Mode().Type())
	}
	if c != nil {
		// No real path (no /proc) is refused too: this check fails closed.
		real, err := fspath.RealPath(f)
		if err != nil || real == "" || !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: real}) {
			return nil, false, tool.Errorf(tool.CodePathEscape, "do not change files while warden reads them",
				"%s changed while it was opened: the file opened is not one the grants allow reading", rel)
		}
		if entry, hidden := c.Hidden(real); hidden {
			return nil, false, gate.HiddenError(real, entry)
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, false, tool.Errorf(tool.CodeToolError, "", "read %s: %v", rel, err)
	}
	truncated := len(data) > max
	if truncated {
		data = data[:max]
		// Do not judge a rune cut at the limit.
		for i := 0; i < utf8.UTFMax && len(data) > 0 && !utf8.Valid(data); i++ {
			data = data[:len(data)-1]
		}
	}
	if !isText(data) {
		return nil, false, tool.Errorf(tool.CodeNotText, "read binary files with a dedicated tool", "%s is not text", rel)
	}
	return data, truncated, nil
}

// isText: no NUL byte, valid UTF-8.
func isText(b []byte) bool {
	return !slices.Contains(b, 0) && utf8.Valid(b)
}

// ---------------------------------------------------------- the index

// IndexOptions configures IndexWorkspace; the zero value (or nil) means the
// defaults.
type IndexOptions struct {
	// MaxFiles caps the files indexed (default 10000); files past it in
	// lexical walk order are left out and Truncated is set.
	MaxFiles int
	// MaxFileBytes skips larger files (default 1 MiB).
	MaxFileBytes int64
	// MaxTextBytes caps the text stored per file (default 32 KiB).
	MaxTextBytes int
	// SkipDirs are directory names skipped wherever they are (default
	// .git, .hg, .svn, .warden, node_modules).
	SkipDirs []string
	// Hide is the policy's hide: list: what it names is never indexed
	// (and dropped from the index if it was).
	Hide pathrule.List
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

func (o *IndexOptions) withDefaults() IndexOptions {
	var r IndexOptions
	if o != nil {
		r = *o
	}
	if r.MaxFiles <= 0 {
		r.MaxFiles = 10000
	}
	if r.MaxFileBytes <= 0 {
		r.MaxFileBytes = 1 << 20
	}
	if r.MaxTextBytes <= 0 {
		r.MaxTextBytes = 32 << 10
	}
	if r.SkipDirs == nil {
		r.SkipDirs = []string{".git", ".hg", ".svn", ".warden", "node_modules"}
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// IndexStats reports what IndexWorkspace did.
type IndexStats struct {
	Workspace string `json:"workspace"`
	Namespace string `json:"namespace"`
	// Files is the number of files in the index afterwards.
	Files     int `json:"files"`
	Added     int `json:"added"`
	Updated   int `json:"updated"`
	Unchanged int `json:"unchanged"`
	Removed   int `json:"removed"`
	// Skipped counts binary, oversized, unreadable and special files and
	// paths too long for a key.
	Skipped int `json:"skipped"`
	// Truncated is true when MaxFiles stopped the walk.
	Truncated bool `json:"truncated"`
}

// fileState is a file's entry in _files_state.
type fileState struct {
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	SHA256  string `json:"sha256"`
	// Racy: the file was modified within 2 s of indexing, so an equal
	// size and mtime later does not prove it unchanged (re-hash it).
	Racy bool `json:"racy,omitempty"`
}

// IndexWorkspace builds or refreshes the index get_context searches: the
// workspace's text files, walked through an os.Root (symlinks are not
// followed, .git and the other SkipDirs are skipped, binary and big files
// left out, at most MaxFiles). It is incremental: a file whose size and
// mtime match its recorded state is not read; one whose content hash is
// unchanged is not rewritten; files gone (or now skipped) are dropped.
// Stored text has its secrets masked. cmd's `warden memory index` calls it;
// it is the owner's operation and checks no grants (get_context checks
// fs.read on every file it returns).
func IndexWorkspace(ctx context.Context, mem gate.Memory, workspace string, opts *IndexOptions) (IndexStats, error) {
	ws, err := filepath.Abs(workspace)
	if err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return IndexStats{}, fmt.Errorf("index workspace: %w", err)
	}
	textNS, stateNS := filesNS(ws)
	x := &indexer{
		ctx: ctx, mem: mem, o: opts.withDefaults(), ws: ws, textNS: textNS, stateNS: stateNS,
		seen: map[string]bool{}, st: IndexStats{Workspace: ws, Namespace: textNS},
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return x.st, fmt.Errorf("index workspace: %w", err)
	}
	defer root.Close()
	x.root = root
	if x.prior, err = loadIndexState(ctx, mem, stateNS); err != nil {
		return x.st, err
	}
	if err := fs.WalkDir(root.FS(), ".", x.visit); err != nil {
		return x.st, fmt.Errorf("index workspace: %w", err)
	}
	if err := x.dropGone(); err != nil {
		return x.st, err
	}
	x.st.Files = len(x.seen)
	return x.st, nil
}

// indexer is one pass of IndexWorkspace over a workspace.
type indexer struct {
	ctx             context.Context
	mem             gate.Memory
	o               IndexOptions
	ws              string
	root            *os.Root
	textNS, stateNS string
	// prior is the recorded state of each indexed file; seen the files
	// in the index after this pass.
	prior map[string]fileState
	seen  map[string]bool
	st    IndexStats
}

// loadIndexState reads the recorded state of each indexed file.
func loadIndexState(ctx context.Context, mem gate.Memory, stateNS string) (map[string]fileState, error) {
	entries, err := mem.ListMemory(ctx, stateNS, 0)
	if err != nil {
		return nil, fmt.Errorf("index workspace: read the index state: %w", err)
	}
	prior := map[string]fileState{}
	for _, e := range entries {
		var s fileState
		if json.Unmarshal([]byte(e.Value), &s) == nil {
			prior[e.Key] = s
		}
	}
	return prior, nil
}

// visit is the walk's function: it skips what is never indexed
// (unreadable, hidden, SkipDirs, not a regular file), stops at MaxFiles,
// and indexes the rest.
func (x *indexer) visit(p string, d fs.DirEntry, err error) error {
	if cerr := x.ctx.Err(); cerr != nil {
		return cerr
	}
	if err != nil {
		if p == "." {
			return err
		}
		x.st.Skipped++ // unreadable directory or entry
		if d != nil && d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	if p != "." {
		if _, hidden := x.o.Hide.Match(x.ws, filepath.Join(x.ws, filepath.FromSlash(p))); hidden {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
	}
	if d.IsDir() {
		if p != "." && slices.Contains(x.o.SkipDirs, d.Name()) {
			return fs.SkipDir
		}
		return nil
	}
	if !d.Type().IsRegular() { // symlinks, FIFOs, sockets, devices
		x.st.Skipped++
		return nil
	}
	if len(x.seen) >= x.o.MaxFiles {
		x.st.Truncated = true
		return fs.SkipAll
	}
	return x.indexFile(p, d)
}

// indexFile brings one regular file's entry up to date: unchanged size
// and mtime are trusted (unless racy), an unchanged hash is not
// rewritten, and its state is recorded when it changed.
func (x *indexer) indexFile(p string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil || info.Size() > x.o.MaxFileBytes || len(p) > maxKeyBytes {
		x.st.Skipped++
		return nil
	}
	old, had := x.prior[p]
	mtime := info.ModTime().UnixNano()
	if had && !old.Racy && old.Size == info.Size() && old.MtimeNS == mtime {
		x.seen[p] = true
		x.st.Unchanged++
		return nil
	}
	data, _, rerr := readFile(x.root, p, nil, int(x.o.MaxFileBytes))
	if rerr != nil {
		x.st.Skipped++
		return nil
	}
	sum := sha256.Sum256(data)
	state := fileState{Size: int64(len(data)), MtimeNS: mtime, SHA256: hex.EncodeToString(sum[:]),
		Racy: x.o.Now().Sub(info.ModTime()) < 2*time.Second}
	stateJSON, _ := json.Marshal(state)
	if !had || old.SHA256 != state.SHA256 {
		if err := x.mem.PutMemory(x.ctx, x.textNS, p, x.indexText(p, data)); err != nil {
			return err
		}
		if had {
			x.st.Updated++
		} else {
			x.st.Added++
		}
	} else {
		x.st.Unchanged++
	}
	if !had || old != state {
		if err := x.mem.PutMemory(x.ctx, x.stateNS, p, string(stateJSON)); err != nil {
			return err
		}
	}
	x.seen[p] = true
	return nil
}

// indexText is the indexed value of file p: its path and its text, cut
// at MaxTextBytes (on a rune boundary), secrets masked.
func (x *indexer) indexText(p string, data []byte) string {
	text := data
	if len(text) > x.o.MaxTextBytes {
		text = text[:x.o.MaxTextBytes]
		for len(text) > 0 && !utf8.Valid(text) {
			text = text[:len(text)-1]
		}
	}
	return "path: " + p + "\n\n" + redact.String(string(text))
}

// dropGone removes from the index the files it held that this pass did
// not keep (deleted, or now skipped).
func (x *indexer) dropGone() error {
	for p := range x.prior {
		if x.seen[p] {
			continue
		}
		for _, ns := range []string{x.textNS, x.stateNS} {
			if err := x.mem.DeleteMemory(x.ctx, ns, p); err != nil && !errors.Is(err, gate.ErrNotFound) {
				return fmt.Errorf("index workspace: drop %s: %w", p, err)
			}
		}
		x.st.Removed++
	}
	return nil
}

// ------------------------------------------------------------ get_context

type getContextTool struct{ mem gate.Memory }

var _ tool.Typed[getContextArgs] = (*getContextTool)(nil)

func (t *getContextTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "get_context",
		Description: "Find the workspace files most relevant to a query, from warden's index of the workspace's text files " +
			"(built and refreshed with `warden memory index`). Returns the file paths, best first, with a snippet of each. " +
			"Only files the fs.read grants allow are returned; target_files need fs.read.",
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

// getContextArgs are get_context's arguments; their schema is its input
// schema.
type getContextArgs struct {
	Query       string   `json:"query" minLength:"1" maxLength:"4096" jsonschema:"What the files should be relevant to."`
	History     string   `json:"history,omitempty" jsonschema:"Recent conversation, used to widen the search (its last 2000 characters)."`
	TargetFiles []string `json:"target_files,omitempty" maxItems:"50" items.minLength:"1" items.maxLength:"4096" jsonschema:"Files known to matter; listed first. Paths relative to the workspace."`
}

type memoryTarget struct{ abs, rel, arg string }

// readNeeds is fs.read of each target file.
func readNeeds(targets []memoryTarget) []capability.Need {
	needs := make([]capability.Need, 0, len(targets))
	for _, tg := range targets {
		needs = append(needs, capability.Need{Kind: capability.FSRead, Resource: tg.abs})
	}
	return needs
}

// targets validates the arguments and resolves the target files.
func (t *getContextTool) targets(c *tool.Call, a *getContextArgs) ([]memoryTarget, *tool.Error) {
	if strings.TrimSpace(a.Query) == "" {
		return nil, tool.Errorf(tool.CodeInvalidInput, "say what the files should be relevant to", "query is empty")
	}
	var targets []memoryTarget
	for _, p := range a.TargetFiles {
		abs, rel, err := workspacePath(c.Workspace, p)
		if err != nil {
			return nil, err
		}
		targets = append(targets, memoryTarget{abs, rel, p})
	}
	return targets, nil
}

// Needs implements tool.Typed: fs.read of each target file. The files
// found by the search are filtered by the fs.read grants as they are found.
func (t *getContextTool) Needs(c *tool.Call, a *getContextArgs) ([]capability.Need, error) {
	targets, err := t.targets(c, a)
	if err != nil {
		return nil, err
	}
	return readNeeds(targets), nil
}

// ContextMatch is one file get_context returns.
type ContextMatch struct {
	Path    string  `json:"path"`
	Score   float64 `json:"score"`
	Snippet string  `json:"snippet,omitempty"`
	// Target is true for a file named in target_files.
	Target bool `json:"target,omitempty"`
	// Stale is true when the file changed since it was indexed.
	Stale bool `json:"stale,omitempty"`
}

// ContextResult is get_context's data (the seed's notes: file_paths
// and context_summary).
type ContextResult struct {
	FilePaths      []string       `json:"file_paths"`
	Matches        []ContextMatch `json:"matches"`
	ContextSummary string         `json:"context_summary"`
	IndexedFiles   int            `json:"indexed_files"`
	// HiddenFiles counts matching files the grants do not allow reading
	// or the policy hides.
	HiddenFiles int `json:"hidden_files"`
	// Gone counts matching files deleted since they were indexed.
	Gone int `json:"gone"`
}

func (t *getContextTool) Run(ctx context.Context, c *tool.Call, a *getContextArgs) tool.Outcome {
	targets, err := t.targets(c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	if t.mem == nil {
		return tool.Outcome{Err: noStore()}
	}
	textNS, stateNS := filesNS(c.Workspace)
	states, lerr := t.mem.ListMemory(ctx, stateNS, 0)
	if lerr != nil {
		return tool.Outcome{Err: storeErr("get_context", lerr)}
	}
	stateOf := map[string]fileState{}
	for _, e := range states {
		var s fileState
		if json.Unmarshal([]byte(e.Value), &s) == nil {
			stateOf[e.Key] = s
		}
	}
	root, oerr := os.OpenRoot(c.Workspace)
	if oerr != nil {
		return tool.Fail(tool.CodeToolError, "", "open the workspace: %v", oerr)
	}
	defer root.Close()

	r := ContextResult{FilePaths: []string{}, Matches: []ContextMatch{}, IndexedFiles: len(states)}
	var warnings []string
	if len(states) == 0 {
		warnings = append(warnings, "the workspace index is empty: run `warden memory index` to build it")
	}
	added := map[string]bool{}
	for _, tg := range targets {
		if added[tg.rel] {
			continue
		}
		if _, err := root.Lstat(filepath.FromSlash(tg.rel)); err != nil {
			warnings = append(warnings, fmt.Sprintf("target file %s does not exist", tg.rel))
			continue
		}
		added[tg.rel] = true
		r.Matches = append(r.Matches, ContextMatch{Path: tg.rel, Target: true, Stale: t.stale(root, tg.rel, stateOf)})
	}

	terms := memoryTerms(a.Query)
	search := a.Query
	if h := a.History; h != "" {
		if len(h) > historyTail {
			h = h[len(h)-historyTail:]
		}
		search += "\n" + strings.ToValidUTF8(h, "")
	}
	hits, serr := t.mem.SearchMemory(ctx, search, func(ns string) bool { return ns == textNS }, 3*contextResults)
	if serr != nil {
		return tool.Outcome{Err: storeErr("get_context", serr)}
	}
	for _, h := range hits {
		if h.Namespace != textNS || added[h.Key] || len(r.Matches) >= contextResults+len(targets) {
			continue
		}
		abs, rel, perr := workspacePath(c.Workspace, h.Key)
		if perr != nil || !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: abs}) {
			r.HiddenFiles++
			continue
		}
		if _, hidden := c.Hidden(abs); hidden {
			// Indexed before the policy hid it: never shown.
			r.HiddenFiles++
			continue
		}
		if _, err := root.Lstat(filepath.FromSlash(rel)); err != nil {
			r.Gone++
			continue
		}
		added[h.Key] = true
		r.Matches = append(r.Matches, ContextMatch{
			Path: h.Key, Score: h.Score, Snippet: snippet(h.Value, terms), Stale: t.stale(root, h.Key, stateOf),
		})
	}
	for _, m := range r.Matches {
		r.FilePaths = append(r.FilePaths, m.Path)
	}
	if r.HiddenFiles > 0 {
		warnings = append(warnings, fmt.Sprintf("%d matching file(s) were left out: the grants do not allow reading them, or the policy hides them", r.HiddenFiles))
	}
	if r.Gone > 0 {
		warnings = append(warnings, fmt.Sprintf("%d matching file(s) were deleted since indexing; run `warden memory index` to refresh", r.Gone))
	}
	if slices.ContainsFunc(r.Matches, func(m ContextMatch) bool { return m.Stale }) {
		warnings = append(warnings, "some files changed since indexing; run `warden memory index` to refresh")
	}
	r.ContextSummary = contextSummary(a.Query, r.Matches)
	out, _ := json.Marshal(r.FilePaths)
	return tool.Outcome{Output: string(out), Data: r, Warnings: warnings}
}

// stale reports whether a file differs from its indexed state (or was
// never indexed).
func (t *getContextTool) stale(root *os.Root, rel string, states map[string]fileState) bool {
	s, ok := states[rel]
	if !ok {
		return true
	}
	info, err := root.Lstat(filepath.FromSlash(rel))
	return err != nil || info.Size() != s.Size || info.ModTime().UnixNano() != s.MtimeNS
}

func contextSummary(query string, ms []ContextMatch) string {
	if len(ms) == 0 {
		return fmt.Sprintf("no indexed file matches %q", oneLine(query, 200))
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Path)
	}
	return fmt.Sprintf("%d file(s) relevant to %q: %s", len(ms), oneLine(query, 200), strings.Join(names, ", "))
}

// memoryTerms lower-cases the words of a query (for snippets).
func memoryTerms(q string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(f) >= 2 && !textutil.IsStopWord(f) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// snippet returns the first line of an indexed file's text holding a
// query term (or its first non-empty line), shortened.
func snippet(value string, terms []string) string {
	_, body, ok := strings.Cut(value, "\n\n")
	if !ok {
		body = value
	}
	first := ""
	for line := range strings.Lines(body) {
		l := strings.TrimSpace(line)
		if l == "" {
			continue
		}
		if first == "" {
			first = l
		}
		low := strings.ToLower(l)
		for _, t := range terms {
			if strings.Contains(low, t) {
				return oneLine(l, snippetBytes)
			}
		}
	}
	return oneLine(first, snippetBytes)
}

// --------------------------------------------------------- prime_context

type primeTool struct{ mem gate.Memory }

var (
	_ tool.Typed[primeArgs]          = (*primeTool)(nil)
	_ tool.TypedPreviewer[primeArgs] = (*primeTool)(nil)
)

func (t *primeTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "prime_context",
		Description: "Put workspace files and/or a text into this run's context, which the agent keeps in its prompt. " +
			"Needs fs.read of each file. Secrets are masked before anything is stored. Undo with clear_context.",
		Capabilities: []capability.Kind{capability.FSRead},
	}
}

// primeArgs are prime_context's arguments; their schema is its input
// schema.
type primeArgs struct {
	Files []string `json:"files,omitempty" maxItems:"50" items.minLength:"1" items.maxLength:"4096" jsonschema:"Workspace files to put into this run's context (each at most 64 KiB is kept)."`
	Text  *string  `json:"text,omitempty" jsonschema:"Text to put into this run's context (at most 256 KiB)."`
}

// targets validates the arguments and resolves the files.
func (t *primeTool) targets(c *tool.Call, a *primeArgs) ([]memoryTarget, *tool.Error) {
	if len(a.Files) == 0 && (a.Text == nil || strings.TrimSpace(*a.Text) == "") {
		return nil, tool.Errorf(tool.CodeInvalidInput, "pass files, text, or both", "nothing to put into the context")
	}
	if a.Text != nil && len(*a.Text) > primeMaxText {
		return nil, tool.Errorf(tool.CodeTooLarge, "prime at most 256 KiB of text; summarize it first",
			"text is %d bytes; the limit is %d", len(*a.Text), primeMaxText)
	}
	var targets []memoryTarget
	for _, p := range a.Files {
		abs, rel, err := workspacePath(c.Workspace, p)
		if err != nil {
			return nil, err
		}
		if len("file:"+rel) > maxKeyBytes {
			return nil, tool.Errorf(tool.CodeInvalidInput, "name files with shorter paths", "path %s is too long for the context", rel)
		}
		targets = append(targets, memoryTarget{abs, rel, p})
	}
	return targets, nil
}

// Needs implements tool.Typed: fs.read of each file. The run's own
// context namespace is warden's and needs no memory grant.
func (t *primeTool) Needs(c *tool.Call, a *primeArgs) ([]capability.Need, error) {
	targets, err := t.targets(c, a)
	if err != nil {
		return nil, err
	}
	return readNeeds(targets), nil
}

// Primed is one entry prime_context stores.
type Primed struct {
	Key       string `json:"key"`
	Path      string `json:"path,omitempty"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
	Redacted  bool   `json:"redacted,omitempty"`
}

// PrimeResult is prime_context's data.
type PrimeResult struct {
	Namespace string   `json:"namespace"`
	RunID     string   `json:"run_id"`
	Entries   []Primed `json:"entries"`
	Bytes     int      `json:"bytes"`
}

type primeEntry struct {
	Primed
	value string
}

// prepare reads everything that would be stored, or fails with nothing
// stored.
func (t *primeTool) prepare(c *tool.Call, a *primeArgs) (PrimeResult, []primeEntry, []string, *tool.Error) {
	targets, err := t.targets(c, a)
	if err != nil {
		return PrimeResult{}, nil, nil, err
	}
	runID := c.RunID
	if runID == "" {
		runID = cliRun
	}
	r := PrimeResult{Namespace: contextNS(c.RunID), RunID: runID, Entries: []Primed{}}
	var entries []primeEntry
	var warnings []string
	if len(targets) > 0 {
		root, oerr := os.OpenRoot(c.Workspace)
		if oerr != nil {
			return r, nil, nil, tool.Errorf(tool.CodeToolError, "", "open the workspace: %v", oerr)
		}
		defer root.Close()
		seen := map[string]bool{}
		for _, tg := range targets {
			// Resolve again: a symlink may have changed since Needs. The
			// file opened is checked against the grants after opening.
			_, rel, perr := workspacePath(c.Workspace, tg.arg)
			if perr != nil {
				return r, nil, nil, perr
			}
			if seen[rel] {
				continue
			}
			seen[rel] = true
			data, truncated, rerr := readFile(root, rel, c, primeMaxFile)
			if rerr != nil {
				return r, nil, nil, rerr
			}
			v := redact.String(string(data))
			e := primeEntry{Primed{Key: "file:" + rel, Path: rel, Bytes: len(v), Truncated: truncated, Redacted: v != string(data)}, v}
			if truncated {
				warnings = append(warnings, fmt.Sprintf("%s is larger than 64 KiB: only its first 64 KiB go into the context", rel))
			}
			entries = append(entries, e)
		}
	}
	if a.Text != nil && strings.TrimSpace(*a.Text) != "" {
		v := redact.String(*a.Text)
		sum := sha256.Sum256([]byte(v))
		entries = append(entries, primeEntry{Primed{Key: "text:" + hex.EncodeToString(sum[:8]), Bytes: len(v), Redacted: v != *a.Text}, v})
	}
	for _, e := range entries {
		r.Entries = append(r.Entries, e.Primed)
		r.Bytes += e.Bytes
		if e.Redacted {
			warnings = append(warnings, fmt.Sprintf("secrets in %s were masked before storing it", cmp.Or(e.Path, "the text")))
		}
	}
	return r, entries, warnings, nil
}

func primeSummary(verb string, r PrimeResult) string {
	files, texts := 0, 0
	for _, e := range r.Entries {
		if e.Path != "" {
			files++
		} else {
			texts++
		}
	}
	return fmt.Sprintf("%s the context of run %s (%s) with %d file(s) and %d text(s), %d bytes", verb, r.RunID, r.Namespace, files, texts, r.Bytes)
}

// Preview implements tool.TypedPreviewer: it reads the files and reports
// what would be stored; it stores nothing.
func (t *primeTool) Preview(_ context.Context, c *tool.Call, a *primeArgs) tool.Outcome {
	r, _, warnings, err := t.prepare(c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	return tool.Outcome{Output: primeSummary("would prime", r), Data: r, Warnings: warnings}
}

func (t *primeTool) Run(ctx context.Context, c *tool.Call, a *primeArgs) tool.Outcome {
	r, entries, warnings, err := t.prepare(c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	if t.mem == nil {
		return tool.Outcome{Err: noStore()}
	}
	for _, e := range entries {
		if perr := t.mem.PutMemory(ctx, r.Namespace, e.Key, e.value); perr != nil {
			return tool.Outcome{Err: storeErr("prime_context", perr), Warnings: warnings}
		}
	}
	return tool.Outcome{Output: primeSummary("primed", r), Data: r, Warnings: warnings}
}

// --------------------------------------------------------- clear_context

type clearTool struct{ mem gate.Memory }

var (
	_ tool.Typed[clearArgs]          = (*clearTool)(nil)
	_ tool.TypedPreviewer[clearArgs] = (*clearTool)(nil)
	_ tool.SchemaRefiner             = (*clearTool)(nil)
)

func (t *clearTool) Spec() tool.Spec {
	return tool.Spec{
		Name:        "clear_context",
		Description: "Empty this run's context (everything prime_context put there). Touches nothing else; needs no grant.",
	}
}

// clearArgs are clear_context's arguments: none.
type clearArgs struct{}

// RefineSchema implements tool.SchemaRefiner: the schema of a struct
// without fields has no properties keyword; clear_context's says, as it
// always did, that there are none.
func (t *clearTool) RefineSchema(s *jsonschema.Schema) {
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
}

// Needs implements tool.Typed: clearing the caller's own run context
// needs nothing.
func (t *clearTool) Needs(*tool.Call, *clearArgs) ([]capability.Need, error) {
	return nil, nil
}

func (t *clearTool) entries(ctx context.Context, c *tool.Call) (string, []gate.MemoryEntry, *tool.Error) {
	if t.mem == nil {
		return "", nil, noStore()
	}
	ns := contextNS(c.RunID)
	es, err := t.mem.ListMemory(ctx, ns, 0)
	if err != nil {
		return ns, nil, storeErr("clear_context", err)
	}
	return ns, es, nil
}

func (t *clearTool) Preview(ctx context.Context, c *tool.Call, _ *clearArgs) tool.Outcome {
	ns, es, err := t.entries(ctx, c)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	keys := []string{}
	for _, e := range es {
		keys = append(keys, e.Key)
	}
	return tool.Outcome{Output: fmt.Sprintf("would remove %d entr(ies) from %s", len(es), ns),
		Data: map[string]any{"namespace": ns, "removed": len(es), "keys": keys}}
}

func (t *clearTool) Run(ctx context.Context, c *tool.Call, _ *clearArgs) tool.Outcome {
	ns, es, err := t.entries(ctx, c)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	removed := 0
	for _, e := range es {
		if derr := t.mem.DeleteMemory(ctx, ns, e.Key); derr != nil && !errors.Is(derr, gate.ErrNotFound) {
			return tool.Outcome{Err: storeErr("clear_context", derr)}
		}
		removed++
	}
	return tool.Outcome{Output: fmt.Sprintf("removed %d entr(ies) from %s", removed, ns), Data: map[string]any{"namespace": ns, "removed": removed}}
}

// RunContext returns the context primed for a run ("" = the CLI's), in the
// order it was primed. The agent loop puts it into the prompt.
func RunContext(ctx context.Context, mem gate.Memory, runID string) ([]gate.MemoryEntry, error) {
	es, err := mem.ListMemory(ctx, contextNS(runID), 0)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(es, func(a, b gate.MemoryEntry) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Key, b.Key))
	})
	return es, nil
}
