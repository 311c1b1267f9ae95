package git

import (
	"strings"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// diffOrigins says which file each section of git's diff output shows
// (the b/ side's path in the workspace), so that a secret masked in it can
// go back into that file (a patch made from the diff). git writes the
// headers itself and prefixes every content line, so a file's content
// cannot pose as a header.
func diffOrigins(ws, out string) []tool.Origin {
	var origins []tool.Origin
	for at := 0; at < len(out); {
		i := strings.Index(out[at:], "diff --git ")
		if i < 0 {
			break
		}
		start := at + i
		if start > 0 && out[start-1] != '\n' {
			at = start + 1
			continue
		}
		eol := strings.IndexByte(out[start:], '\n')
		if eol < 0 {
			break
		}
		next := strings.Index(out[start+eol:], "\ndiff --git ")
		end := len(out)
		if next >= 0 {
			end = start + eol + next + 1
		}
		if _, b, ok, e := diffGitNames(out[start+len("diff --git ") : start+eol]); e == nil && ok {
			if abs, err := capability.ResolvePath(ws, b); err == nil && strings.HasPrefix(abs, ws+"/") {
				origins = append(origins, tool.Origin{Path: abs, Start: start, End: end})
			}
		}
		at = end
	}
	return origins
}

// showOrigins: a commit's output is a diff (diffOrigins); a blob
// named REV:PATH is that file's content.
func showOrigins(ws, ref, typ, out string) []tool.Origin {
	switch typ {
	case "commit":
		return diffOrigins(ws, out)
	case "blob":
		if _, path, ok := strings.Cut(ref, ":"); ok && path != "" && !strings.HasPrefix(path, "/") {
			if abs, err := capability.ResolvePath(ws, strings.TrimPrefix(path, "./")); err == nil && strings.HasPrefix(abs, ws+"/") {
				return []tool.Origin{{Path: abs}}
			}
		}
	}
	return nil
}
