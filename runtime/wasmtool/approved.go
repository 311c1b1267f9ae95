package wasmtool

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/wardenrt/warden/runtime/decode"
)

// Checking a module against its pin hashes it: the registry checks every
// installed module, and the first call of a module's tool checks it again
// before compiling it, in every process (every `warden call`). For a module
// of a few MiB that is a few milliseconds each, a good part of a call.
//
// approvals saves them, in a directory of the compilation cache (private,
// checked like the rest of it: it holds native code warden runs, so it is
// trusted at least as much as anything here). For each module it keeps the
// stamp of its files (fileStamp) when they last hashed to their pin; files
// whose stamps are unchanged are taken as unchanged and not hashed again.
// A stamp can miss a change (a writer through a shared mapping changes the
// times at its first write only, until the page is written back; on tmpfs
// not at all), so it never decides what runs: it decides only whether the
// module is read from its file, and hashed, or from the copy of the
// approved bytes kept here, written after they hashed to the pin and
// named by that hash. A change a stamp misses runs the approved module, as
// if the change had not happened; a change it sees is hashed and refused
// as before. See RATIONALE.md, "Wasm tools".
type approvals struct {
	dir string // "" keeps nothing: every check hashes
}

// racyWindow: a file changed this recently is not stamped, so that a
// change within the same tick of the clock as the stamped state (its times
// would not move) is not missed.
const racyWindow = time.Second

// fileStamp identifies a file's content without reading it: which file
// (device and inode), its size, and when its content and its metadata last
// changed. The change time moves with every write and cannot be set back.
type fileStamp struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// verified is what approvals keeps of a module: the stamps of its files
// when they last hashed, and their hashes (no sidecar: Sidecar nil,
// SidecarSHA256 "").
type verified struct {
	Wasm          fileStamp  `json:"wasm"`
	SHA256        string     `json:"sha256"`
	Sidecar       *fileStamp `json:"sidecar,omitempty"`
	SidecarSHA256 string     `json:"sidecar_sha256,omitempty"`
}

func newApprovals(cacheDir string) approvals {
	if cacheDir == "" {
		return approvals{}
	}
	return approvals{dir: filepath.Join(cacheDir, "approved")}
}

func (a approvals) entryPath(module string) string { return filepath.Join(a.dir, module+".json") }
func (a approvals) copyPath(sum string) string     { return filepath.Join(a.dir, sum+".wasm") }

// unchanged reports whether module's files are as they were when they last
// hashed to pin.
func (a approvals) unchanged(module, wasmPath, scPath string, pin *Pin) bool {
	if a.dir == "" {
		return false
	}
	b, err := decode.ReadFile(a.entryPath(module), 4<<10)
	var v verified
	if err != nil || json.Unmarshal(b, &v) != nil || v.SHA256 != pin.SHA256 || v.SidecarSHA256 != pin.SidecarSHA256 {
		return false
	}
	if s, ok := lstamp(wasmPath); !ok || s != v.Wasm {
		return false
	}
	s, ok := lstamp(scPath)
	if v.Sidecar == nil {
		_, err := os.Lstat(scPath)
		return errors.Is(err, fs.ErrNotExist)
	}
	return ok && s == *v.Sidecar
}

// lstamp is the stamp of the file at path itself (a symlink's own).
func lstamp(path string) (fileStamp, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileStamp{}, false
	}
	return stampOf(fi)
}

// remember records v for module, unless a file changed within racyWindow
// of now. Best effort: a failure leaves the next check hashing.
func (a approvals) remember(module string, v verified, now time.Time) {
	if a.dir == "" {
		return
	}
	for _, s := range []*fileStamp{&v.Wasm, v.Sidecar} {
		if s != nil && (now.UnixNano()-s.MtimeNS < int64(racyWindow) || now.UnixNano()-s.CtimeNS < int64(racyWindow)) {
			return
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	if old, err := decode.ReadFile(a.entryPath(module), 4<<10); err == nil {
		var was verified
		if json.Unmarshal(old, &was) == nil && was.SHA256 != v.SHA256 && validSum(was.SHA256) {
			_ = os.Remove(a.copyPath(was.SHA256))
		}
	}
	_ = a.write(a.entryPath(module), b)
}

// forget drops what approvals keeps of module (removed).
func (a approvals) forget(module string, pin *Pin) {
	if a.dir == "" {
		return
	}
	_ = os.Remove(a.entryPath(module))
	if pin != nil && validSum(pin.SHA256) {
		_ = os.Remove(a.copyPath(pin.SHA256))
	}
}

// keep stores b, which hashed to sum, as the approved copy of sum, unless
// it is there already.
func (a approvals) keep(sum string, b []byte) {
	if a.dir == "" || !validSum(sum) {
		return
	}
	if fi, err := os.Lstat(a.copyPath(sum)); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(b)) {
		return
	}
	_ = a.write(a.copyPath(sum), b)
}

// bytes returns the approved copy of sum, if there is one.
func (a approvals) bytes(sum string) ([]byte, bool) {
	if a.dir == "" || !validSum(sum) {
		return nil, false
	}
	fi, err := os.Lstat(a.copyPath(sum))
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, err := decode.ReadFile(a.copyPath(sum), maxModuleBytes)
	return b, err == nil
}

// write puts b at path atomically (a private temp file renamed into
// place) in the private directory.
func (a approvals) write(path string, b []byte) error {
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(a.dir, ".write-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(f.Name())
		return errors.Join(werr, cerr)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}

// validSum reports whether s is a sha256 in hex (a file name of ours).
func validSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
