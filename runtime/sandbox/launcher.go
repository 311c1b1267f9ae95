package sandbox

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
)

// LauncherName is the small launcher's file name (cmd/warden-sandbox):
// installed beside warden's binary, it starts sandboxed programs in
// place of warden's own binary re-executed, which spends most of a
// program's start on warden's size and its packages' initialisation.
const LauncherName = "warden-sandbox"

var (
	launcherMu       sync.Mutex
	launcherOverride string // UseLauncher
	launcherFound    *string
)

// UseLauncher makes Command (and the pool) start programs through the
// launcher binary at path — for tests, which run inside a test binary with
// no launcher beside it — until the returned function is called, which
// gives back the launcher used before (a test's own inside a
// WARDEN_TEST_LAUNCHER=small run) and ends the launchers started ahead.
func UseLauncher(path string) (restore func()) {
	launcherMu.Lock()
	before := launcherOverride
	launcherOverride = path
	launcherMu.Unlock()
	return func() {
		launcherMu.Lock()
		launcherOverride = before
		launcherMu.Unlock()
		ClosePools()
	}
}

// Launcher describes the launcher programs start through here (for
// warden sandbox check): the small launcher's path, or "" when warden
// re-executes its own binary.
func Launcher() string {
	if p := launcherPath(); p != "/proc/self/exe" {
		return p
	}
	return ""
}

// launcherPath is the binary Command re-executes as the launcher: the
// small launcher beside this executable when it is one this warden can
// trust (smallLauncher), else this binary itself.
func launcherPath() string {
	launcherMu.Lock()
	defer launcherMu.Unlock()
	if launcherOverride != "" {
		return launcherOverride
	}
	if launcherFound == nil {
		p := smallLauncher()
		launcherFound = &p
	}
	if *launcherFound != "" {
		return *launcherFound
	}
	return "/proc/self/exe"
}

// smallLauncher returns the small launcher beside this executable, or ""
// when there is none it may use: a regular file that only its owner —
// this user or root — can change, built from the same module at the same
// version and revision with the same Go (its build information, read from
// the file, against this binary's). A launcher from another build could
// read the sandbox's spec differently; it would refuse a spec of another
// shape (Spec.Shape), but the check here keeps it from being tried.
func smallLauncher() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(exe), LauncherName)
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o022 != 0 || fi.Mode()&0o111 == 0 || !ownedByUs(fi) {
		return ""
	}
	own, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	other, err := buildinfo.ReadFile(p)
	if err != nil || !sameBuild(own, other) {
		return ""
	}
	return p
}

// sameBuild reports whether two binaries come from one build of the
// module: same module path and version, Go version, target, and version
// control revision (with its modified flag and time), where recorded.
func sameBuild(a, b *debug.BuildInfo) bool {
	if a.Main.Path == "" || a.Main.Path != b.Main.Path || a.Main.Version != b.Main.Version || a.GoVersion != b.GoVersion {
		return false
	}
	get := func(bi *debug.BuildInfo, k string) string {
		for _, s := range bi.Settings {
			if s.Key == k {
				return s.Value
			}
		}
		return ""
	}
	for _, k := range []string{"GOOS", "GOARCH", "CGO_ENABLED", "vcs", "vcs.revision", "vcs.modified", "vcs.time"} {
		if get(a, k) != get(b, k) {
			return false
		}
	}
	deps := map[string]string{}
	for _, d := range a.Deps {
		deps[d.Path] = d.Version + " " + d.Sum
	}
	for _, d := range b.Deps {
		if v, ok := deps[d.Path]; !ok || v != d.Version+" "+d.Sum {
			return false
		}
	}
	return true
}

// specShape names Spec's layout: the name, type and JSON tag of every
// field, recursively.
var specShape = sync.OnceValue(func() string {
	var b strings.Builder
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		fmt.Fprintf(&b, "%s(", t.String())
		if t.Kind() == reflect.Struct && depth < 4 {
			for i := range t.NumField() {
				f := t.Field(i)
				fmt.Fprintf(&b, "%s %q ", f.Name, f.Tag.Get("json"))
				walk(f.Type, depth+1)
			}
		}
		b.WriteString(")")
	}
	walk(reflect.TypeFor[Spec](), 0)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
})
