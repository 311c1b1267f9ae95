package gitcfg

import (
	"bytes"
	"context"
	"strconv"
	"sync"

	"github.com/wardenrt/warden/runtime/tool"
)

// maxGitlinks caps the gitlinks kept (their names, for a message).
const maxGitlinks = 64

// Gitlinks lists, with git itself (git ls-files -s -z, in the reader's
// sandbox), the paths the index of the repository at gitDir records as
// gitlinks (mode 160000: submodules, or repositories added whole): git
// starts git inside each that holds a .git — naming its repository
// itself, so without the ownership check — to see whether it changed.
// git reads its own index, whatever its version, split or sparse (it
// expands a sparse index), so no reading of warden's can disagree with
// it. Only the gitlinks are kept of what git prints, however much that is.
func (r Reader) Gitlinks(ctx context.Context, gitDir string) ([]string, *tool.Error) {
	w := &gitlinkWriter{}
	_, code, e := r.runTo(ctx, gitDir, w, "ls-files", "-s", "-z")
	if e != nil {
		return nil, e
	}
	if code != 0 {
		return nil, tool.Errorf(tool.CodePolicyDenied, r.Hint, "git could not list the repository's index (exit %d), to find its submodules", code)
	}
	return w.links(), nil
}

// gitlinkWriter keeps, of ls-files -s -z records ("<mode> <object>
// <stage>\t<path>\0"), the paths of those with mode 160000.
type gitlinkWriter struct {
	mu      sync.Mutex
	partial []byte // a record not yet ended, at most its head and path
	found   []string
}

func (g *gitlinkWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, 0)
		if i < 0 {
			if len(g.partial) < 1<<16 { // a path is at most PATH_MAX; the rest is not kept
				g.partial = append(g.partial, p[:min(len(p), 1<<16-len(g.partial))]...)
			}
			break
		}
		rec := p[:i]
		if len(g.partial) > 0 {
			rec = append(g.partial, rec...)
			g.partial = g.partial[:0]
		}
		// The mode as git prints it (%06o of the index's 32 bits, high
		// bits and all), tested as git tests it: S_IFMT of it.
		sp, tab := bytes.IndexByte(rec, ' '), bytes.IndexByte(rec, '\t')
		if sp > 0 && tab > sp {
			// A mode that does not read counts as a gitlink: refused.
			if mode, err := strconv.ParseUint(string(rec[:sp]), 8, 32); (err != nil || mode&0o170000 == 0o160000) && len(g.found) < maxGitlinks {
				g.found = append(g.found, string(rec[tab+1:]))
			}
		}
		p = p[i+1:]
	}
	return n, nil
}

// links are the gitlinks found (at most maxGitlinks of them named).
func (g *gitlinkWriter) links() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.found
}
