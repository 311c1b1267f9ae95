// Package pathrule matches the path lists of a policy — protect: (paths no
// program may change, whatever the fs.write grants) and hide: (paths no
// program or tool may read, whatever the fs.read grants) — against paths,
// and finds the existing paths they name.
//
// # Entries
//
// An entry is a path or a doublestar glob, in one of three forms:
//
//	.env, *.pem, secrets/  no "/" but at the end: a name, matched against
//	                       every path element under the workspace, at any
//	                       depth (as in .gitignore; the trailing "/" is
//	                       dropped)
//	config/*.key, a/b      a "/" inside: relative to the workspace
//	/etc/app/token         absolute
//
// A path matches an entry when it, or a directory it lies in, does: hiding
// secrets/ hides everything under it. Name entries never match inside a
// .git directory (git's own files are not the workspace's); anchored and
// absolute ones do. Matching is case-sensitive. Entries may not contain
// "..", NUL, or "~".
package pathrule

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// List is a compiled list of entries. The zero List matches nothing.
type List struct {
	rules []rule
}

type rule struct {
	lit   string // a literal absolute path (Literal): what Resolve looks for
	entry string // as written
	pat   string // the pattern: a name (name rules), ws-relative or absolute
	name  bool   // matched against every element's name
	abs   bool
	glob  bool // pat holds glob meta characters
}

// Check reports what is wrong with an entry, or nil.
func Check(entry string) error {
	e := strings.TrimSuffix(entry, "/")
	switch {
	case strings.TrimSpace(entry) == "" || e == "" && entry != "/":
		return errors.New("an entry cannot be empty")
	case entry == "/" || e == "**" || e == "*":
		return fmt.Errorf("%q names everything", entry)
	case strings.ContainsRune(entry, 0):
		return errors.New("an entry cannot contain a NUL byte")
	case strings.HasPrefix(entry, "~"):
		return fmt.Errorf("%q: ~ is not expanded; write the absolute path", entry)
	case strings.Contains(entry, `\`):
		return fmt.Errorf("%q: backslash escapes are not supported", entry)
	}
	for _, el := range strings.Split(e, "/") {
		if el == ".." || el == "." {
			return fmt.Errorf("%q: %q elements are not allowed", entry, el)
		}
	}
	if !doublestar.ValidatePattern(strings.TrimPrefix(e, "/")) {
		return fmt.Errorf("%q is not a valid glob pattern", entry)
	}
	return nil
}

// New compiles entries; entries Check refuses are left out (a policy
// checks them when it is loaded).
func New(entries []string) List {
	var l List
	for _, e := range entries {
		if Check(e) != nil {
			continue
		}
		p := strings.TrimSuffix(e, "/")
		r := rule{entry: e, pat: p, abs: strings.HasPrefix(p, "/")}
		r.name = !r.abs && !strings.Contains(p, "/")
		r.glob = strings.ContainsAny(p, "*?[{")
		l.rules = append(l.rules, r)
		// An absolute path through a symlink also names where it leads:
		// tools and programs reach it by its resolved path.
		if r.abs && !r.glob {
			if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
				l.rules = append(l.rules, rule{entry: e, pat: escapeMeta(real), abs: true, lit: real})
			}
		}
	}
	return l
}

// Literal is a list of absolute paths matched as they are — glob
// characters in them are plain characters — and by where their symlinks
// lead: what warden itself keeps out of reach (its home).
func Literal(paths ...string) List {
	var l List
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		l.rules = append(l.rules, rule{entry: p, pat: escapeMeta(p), abs: true, lit: p})
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			l.rules = append(l.rules, rule{entry: p, pat: escapeMeta(real), abs: true, lit: real})
		}
	}
	return l
}

// Join is the list of both l's and o's entries.
func (l List) Join(o List) List {
	return List{rules: append(slices.Clone(l.rules), o.rules...)}
}

// Empty reports whether the list has no entries.
func (l List) Empty() bool { return len(l.rules) == 0 }

// Entries returns the entries as written.
func (l List) Entries() []string {
	out := make([]string, len(l.rules))
	for i, r := range l.rules {
		out[i] = r.entry
	}
	return out
}

// Match returns the entry that matches p (absolute and clean) or one of
// the directories it lies in, and true; or "", false. ws is the absolute
// workspace relative entries are anchored to.
func (l List) Match(ws, p string) (string, bool) {
	if len(l.rules) == 0 || !filepath.IsAbs(p) {
		return "", false
	}
	p = filepath.Clean(p)
	ws = filepath.Clean(ws)
	rel := ""
	if p == ws {
		rel = "."
	} else if strings.HasPrefix(p, ws+"/") || ws == "/" {
		rel = strings.TrimPrefix(strings.TrimPrefix(p, ws), "/")
	}
	for _, r := range l.rules {
		if r.abs {
			if matchAncestors(r.pat, p) {
				return r.entry, true
			}
			continue
		}
		if rel == "" || rel == "." {
			continue
		}
		if r.name {
			for _, el := range strings.Split(rel, "/") {
				if el == ".git" {
					break
				}
				if ok, _ := doublestar.Match(r.pat, el); ok {
					return r.entry, true
				}
			}
			continue
		}
		if matchAncestors(r.pat, rel) {
			return r.entry, true
		}
	}
	return "", false
}

// matchAncestors reports whether pat matches p or a directory above it
// (p slash-separated; absolute or relative like pat).
func matchAncestors(pat, p string) bool {
	for q := p; q != "" && q != "." && q != "/"; q = filepath.Dir(q) {
		if ok, _ := doublestar.Match(pat, q); ok {
			return true
		}
		if !strings.Contains(q, "/") {
			break
		}
	}
	return false
}

// ErrTooMany is returned by Resolve when the entries name, or the search
// for them visits, more than its limits allow.
var ErrTooMany = errors.New("pathrule: too many paths")

// Resolve returns the existing paths the entries name — the topmost ones:
// nothing under a matched directory — with symlinks resolved, sorted. Name
// entries and globs are looked for by walking the workspace (never into
// .git), visiting at most maxVisit entries; at most maxMatch paths are
// returned. Beyond either it returns ErrTooMany, so that a caller holding
// them fails closed.
func (l List) Resolve(ws string, maxVisit, maxMatch int) ([]string, error) {
	if len(l.rules) == 0 {
		return nil, nil
	}
	var out []string
	add := func(p string) error {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil // gone meanwhile, or a dangling link: nothing to hold
		}
		if !slices.Contains(out, real) {
			out = append(out, real)
		}
		if len(out) > maxMatch {
			return fmt.Errorf("%w: the entries name more than %d paths", ErrTooMany, maxMatch)
		}
		return nil
	}
	walk := false
	for _, r := range l.rules {
		switch {
		case r.name:
			walk = true
		case r.glob:
			pat := r.pat
			if !r.abs {
				pat = escapeMeta(ws) + "/" + pat
			}
			ms, err := doublestar.FilepathGlob(pat, doublestar.WithNoFollow())
			if err != nil {
				continue
			}
			for _, m := range ms {
				if err := add(m); err != nil {
					return nil, err
				}
			}
		case r.abs:
			p := r.pat
			if r.lit != "" {
				p = r.lit
			}
			if _, err := os.Lstat(p); err == nil {
				if err := add(p); err != nil {
					return nil, err
				}
			}
		default:
			p := filepath.Join(ws, r.pat)
			if _, err := os.Lstat(p); err == nil {
				if err := add(p); err != nil {
					return nil, err
				}
			}
		}
	}
	if walk && ws != "" {
		visited := 0
		err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == ws {
					return err
				}
				return nil // unreadable: a program cannot read it either
			}
			if p == ws {
				return nil
			}
			if visited++; visited > maxVisit {
				return fmt.Errorf("%w: more than %d files and directories to search in %s; use entries with a / (anchored to the workspace), which need no search", ErrTooMany, maxVisit, ws)
			}
			if d.IsDir() && d.Name() == ".git" {
				return fs.SkipDir
			}
			if _, ok := l.Match(ws, p); ok {
				if err := add(p); err != nil {
					return err
				}
				if d.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	slices.Sort(out)
	// Keep the topmost: drop what lies under another result.
	var top []string
	for _, p := range out {
		if !slices.ContainsFunc(top, func(t string) bool { return strings.HasPrefix(p, t+"/") }) {
			top = append(top, p)
		}
	}
	return top, nil
}

// escapeMeta escapes glob meta characters so that s matches only itself.
func escapeMeta(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]{}\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
