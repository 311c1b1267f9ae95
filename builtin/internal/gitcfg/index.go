package gitcfg

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxIndex bounds the index files Gitlinks reads.
const maxIndex = 512 << 20

// Gitlinks lists the paths the repository's index at gitDir records as
// gitlinks (mode 160000: submodules, or repositories added whole): git
// runs git inside each that holds a .git — with the configuration found
// there — to see whether it changed (status, diff-files, diff-index), and
// what a command starts there has no check of its own. hashLen is the
// object name length (20 for SHA-1, 32 for SHA-256). It reads the index
// files themselves (versions 2 to 4, and the shared index of a split
// one); no index is no gitlink.
func Gitlinks(gitDir string, hashLen int) ([]string, error) {
	links, shared, err := indexGitlinks(filepath.Join(gitDir, "index"), hashLen)
	if err != nil || shared == "" {
		return links, err
	}
	more, _, err := indexGitlinks(filepath.Join(gitDir, "sharedindex."+shared), hashLen)
	return append(links, more...), err
}

// AnyGitlinks is Gitlinks read with each object name length git may use
// (SHA-1, SHA-256): the configuration warden lists (with its includes)
// need not decide it as git does, so the gitlinks of every reading that
// succeeds count; an error only when none does.
func AnyGitlinks(gitDir string) ([]string, error) {
	var out []string
	var first error
	ok := false
	for _, n := range []int{20, 32} {
		links, err := Gitlinks(gitDir, n)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		ok = true
		for _, l := range links {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	if !ok {
		return nil, first
	}
	return out, nil
}

// indexGitlinks reads one index file: its gitlinks, and the shared index
// it names (a split index's "link" extension).
func indexGitlinks(path string, hashLen int) ([]string, string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndex+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > maxIndex {
		return nil, "", fmt.Errorf("%s is over %d bytes", path, maxIndex)
	}
	return parseIndex(b, hashLen)
}

// parseIndex reads an index file's entries and extensions.
func parseIndex(b []byte, hashLen int) ([]string, string, error) {
	bad := func(why string) ([]string, string, error) { return nil, "", errors.New("unreadable git index: " + why) }
	if len(b) < 12+hashLen || string(b[:4]) != "DIRC" {
		return bad("no index header")
	}
	version := binary.BigEndian.Uint32(b[4:])
	if version < 2 || version > 4 {
		return bad(fmt.Sprintf("version %d", version))
	}
	count := binary.BigEndian.Uint32(b[8:])
	end := len(b) - hashLen // the trailing checksum
	fixed := 40 + hashLen + 2
	var links []string
	var prev []byte
	off := 12
	for i := uint32(0); i < count; i++ {
		start := off
		if off+fixed > end {
			return bad("entries run past the end")
		}
		mode := binary.BigEndian.Uint32(b[off+24:])
		flags := binary.BigEndian.Uint16(b[off+40+hashLen:])
		off += fixed
		if flags&0x4000 != 0 {
			if version < 3 {
				return bad("extended flags in version 2")
			}
			off += 2
		}
		if off >= end {
			return bad("entries run past the end")
		}
		// The name's length is the flags' when below 0xFFF, as git reads
		// it (a NUL inside is git's business), else up to the first NUL.
		n := int(flags & 0xFFF)
		var name []byte
		if version == 4 {
			strip, k := binary.Uvarint(b[off:min(off+10, end)])
			if k <= 0 || strip > uint64(len(prev)) {
				return bad("bad path prefix")
			}
			off += k
			kept := prev[: len(prev)-int(strip) : len(prev)-int(strip)]
			suffix := n - len(kept)
			if n == 0xFFF {
				suffix = bytes.IndexByte(b[off:end], 0)
			}
			if suffix < 0 || off+suffix >= end {
				return bad("bad path")
			}
			name = append(kept, b[off:off+suffix]...)
			off += suffix + 1
		} else {
			if n == 0xFFF {
				n = bytes.IndexByte(b[off:end], 0)
			}
			if n < 0 || off+n >= end {
				return bad("bad path")
			}
			name = b[off : off+n]
			off = start + (off-start+n+8)&^7 // padded with 1 to 8 NULs
		}
		prev = name
		if mode&0o170000 == 0o160000 { // S_ISGITLINK, as git tests it
			links = append(links, string(name))
		}
	}
	// Extensions: a four-byte signature and a length; "link" starts with
	// the shared index's object name.
	shared := ""
	for off+8 <= end {
		sig, n := string(b[off:off+4]), int(binary.BigEndian.Uint32(b[off+4:]))
		off += 8
		if n < 0 || off+n > end {
			return bad("extension runs past the end")
		}
		if sig == "link" && n >= hashLen {
			shared = fmt.Sprintf("%x", b[off:off+hashLen])
			if strings.Trim(shared, "0") == "" {
				shared = ""
			}
		}
		off += n
	}
	return links, shared, nil
}
