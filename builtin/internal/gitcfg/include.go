package gitcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Include is one include of the repository's configuration: include.path
// or includeIf.<condition>.path, whatever the condition (it may hold
// later, or in another working directory).
type Include struct {
	Key  string // as git lists it: include.path, includeif.<condition>.path
	From string // the file that holds it
	// Path is the file git opens: the value with ~/ expanded and, when
	// relative, after the holding file's directory — as git builds it,
	// neither cleaned nor resolved.
	Path string
}

// Includes returns the includes the repository's own entries hold
// (Entry.Repository), their paths built as git builds them; home is the
// HOME git sees. An include whose path cannot be built here — ~user/,
// %(prefix)/, relative to a file of unknown location — is an error.
func Includes(entries []Entry, home string) ([]Include, error) {
	var out []Include
	for _, e := range entries {
		if !e.Repository() || e.Scope == "" && strings.HasPrefix(e.Origin, "command line:") {
			continue
		}
		section, _, name := split(e.Key)
		if name != "path" || !(e.Key == "include.path" || section == "includeif") || e.Value == "" {
			continue
		}
		in := Include{Key: e.Key, From: strings.TrimPrefix(e.Origin, "file:")}
		v := e.Value
		switch {
		case strings.HasPrefix(v, "~/"):
			if home == "" {
				return nil, fmt.Errorf("%s = %s: HOME is not set", e.Key, v)
			}
			in.Path = home + v[1:]
		case strings.HasPrefix(v, "~"), strings.HasPrefix(v, "%("):
			return nil, fmt.Errorf("%s = %s in %s: warden does not resolve ~user/ or %%(prefix)/ includes", e.Key, v, in.From)
		case filepath.IsAbs(v):
			in.Path = v
		default:
			if !strings.HasPrefix(e.Origin, "file:") || !filepath.IsAbs(in.From) {
				return nil, fmt.Errorf("%s = %s: the file that holds it (%q) is not known by its absolute path", e.Key, v, e.Origin)
			}
			in.Path = in.From[:strings.LastIndexByte(in.From, '/')+1] + v
		}
		out = append(out, in)
	}
	return out, nil
}

// maxLinks bounds the symlinks Chain follows (the kernel's own limit).
const maxLinks = 40

// Chain returns the paths that decide which file opening p reaches: each
// symlink on the way, where it lies (replacing it changes where p leads),
// and the file reached at the end — or, when a part of the path does not
// exist, the path from there on, where it would be created. Symlinks are
// followed as the kernel would (".." after a symlink is the parent of its
// target).
func Chain(p string) ([]string, error) {
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("%s is not an absolute path", p)
	}
	var out []string
	rest := strings.Split(p, "/")
	cur, links := "/", 0
	for len(rest) > 0 {
		el := rest[0]
		rest = rest[1:]
		switch el {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, el)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return append(out, filepath.Join(append([]string{next}, rest...)...)), nil
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return nil, fmt.Errorf("%s: too many symlinks", p)
		}
		out = append(out, next)
		target, err := os.Readlink(next)
		if err != nil {
			return nil, err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return append(out, cur), nil
}
