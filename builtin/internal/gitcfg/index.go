package gitcfg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
		var name []byte
		if version == 4 {
			strip, n := binary.Uvarint(b[off:min(off+10, end)])
			if n <= 0 || strip > uint64(len(prev)) {
				return bad("bad path prefix")
			}
			off += n
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 {
				return bad("unterminated path")
			}
			name = append(prev[:len(prev)-int(strip):len(prev)-int(strip)], b[off:off+nul]...)
			off += nul + 1
		} else {
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 {
				return bad("unterminated path")
			}
			name = b[off : off+nul]
			off = start + (off-start+nul+8)&^7 // padded with 1 to 8 NULs
		}
		prev = name
		if mode>>12 == 0o16 { // S_IFGITLINK
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
