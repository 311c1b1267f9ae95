package wasmtool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wardenrt/warden/runtime/gate"
)

// An install stages a module's files in Dir as
// .install.PID.NAME.wasm.tmp and .install.PID.NAME.tool.yaml.tmp (names
// Load does not take for modules), pins them, and then renames them into
// place. A process killed on the way leaves staged files behind, which
// the next Load settles: those of a module the install had pinned are put
// in place when its file is not there (the install was done but for the
// rename), the others removed.

const (
	stagedWasm    = ".wasm"
	stagedSidecar = ".tool.yaml"
	stagedPrefix  = ".install."
	stagedSuffix  = ".tmp"
)

// stagedPath is where this process stages name's file of kind (stagedWasm
// or stagedSidecar).
func (h *Host) stagedPath(name, kind string) string { return stagedFile(h.o.Dir, name, kind) }

func stagedFile(dir, name, kind string) string {
	return filepath.Join(dir, fmt.Sprintf("%s%d.%s%s%s", stagedPrefix, os.Getpid(), name, kind, stagedSuffix))
}

// ModuleFiles returns the files of module name in dir as they are to be
// read now: this process's staged copies while it installs the module
// (what a Pins store's PutPin sees: the pin is written before the files
// are put in place), else the module's own.
func ModuleFiles(dir, name string) (wasm, sidecar string) {
	if st := stagedFile(dir, name, stagedWasm); fileExists(st) {
		return st, stagedFile(dir, name, stagedSidecar)
	}
	return filepath.Join(dir, name+".wasm"), filepath.Join(dir, name+".tool.yaml")
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// parseStaged reads a staged file's name: the installing process, the
// module and the kind.
func parseStaged(file string) (pid int, name, kind string, ok bool) {
	rest, ok := strings.CutPrefix(file, stagedPrefix)
	if !ok {
		return 0, "", "", false
	}
	if rest, ok = strings.CutSuffix(rest, stagedSuffix); !ok {
		return 0, "", "", false
	}
	p, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, "", "", false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, "", "", false
	}
	for _, k := range []string{stagedWasm, stagedSidecar} {
		if n, found := strings.CutSuffix(rest, k); found && n != "" && !strings.Contains(n, ".") {
			return pid, n, k, true
		}
	}
	return 0, "", "", false
}

// settleStaged settles the staged files that installs which are no longer
// running left in Dir (entries are its entries), and reports whether it
// put any in place. Errors are ignored: the next Load tries again.
func (h *Host) settleStaged(ctx context.Context, entries []os.DirEntry) (placed bool) {
	for _, e := range entries {
		file := e.Name()
		path := filepath.Join(h.o.Dir, file)
		if strings.HasPrefix(file, ".install-") {
			// An older warden's temporary copy: removed once surely
			// abandoned.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.Remove(path)
			}
			continue
		}
		pid, name, kind, ok := parseStaged(file)
		if !ok || pid == os.Getpid() || pidAlive(pid) {
			continue
		}
		// The pin as it is now that its installer is gone (not as Load
		// read it before: the installer may have pinned it since).
		pin, err := h.pin(ctx, name)
		if err != nil && !errors.Is(err, gate.ErrNotFound) {
			continue
		}
		if err == nil {
			final, want := h.wasmPath(name), pin.SHA256
			if kind == stagedSidecar {
				final, want = h.sidecarPath(name), pin.SidecarSHA256
			}
			max := int64(maxModuleBytes)
			if kind == stagedSidecar {
				max = MaxSidecarBytes
			}
			if _, err := os.Lstat(final); os.IsNotExist(err) {
				if _, sum, err := readHashed(path, max); err == nil && sum == want && os.Rename(path, final) == nil {
					placed = true
					continue
				}
			}
		}
		os.Remove(path)
	}
	if placed {
		syncDir(h.o.Dir)
	}
	return placed
}
