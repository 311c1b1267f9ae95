package sandbox

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What a granted program needs to be executable besides itself. Landlock
// gives the execute right per file (Spec.Exec), so a program started under
// the sandbox can execute only
//
//   - the programs the call's exec: grants name, as warden finds them on
//     its fixed PATH (symlinks resolved);
//   - the interpreter a script among them names on its #! line (and, for
//     "#!/usr/bin/env NAME", env and NAME on the same PATH);
//   - the dynamic loader an ELF program among them names (PT_INTERP);
//   - the helper programs listed in Helpers for some of them.
//
// Everything else — /usr/bin's other programs, anything in the workspace
// or a temporary directory — can be read but not executed.

// Helpers are the programs a granted program runs as part of itself,
// keyed by its base name: a directory given opens every file under it.
// Each entry is resolved at the time of the call; missing ones are left
// out. A grant of one of these names is also a grant of its helpers.
var Helpers = map[string]func(real string) []string{
	// git runs its own programs from its exec path (git-remote-http for
	// http(s) remotes, git-upload-pack for local clones, git-sh-*,
	// merge and credential helpers, …).
	"git": func(real string) []string {
		return []string{
			"/usr/lib/git-core", "/usr/libexec/git-core", "/usr/local/libexec/git-core",
			filepath.Join(filepath.Dir(filepath.Dir(real)), "libexec", "git-core"),
		}
	},
	// go runs its toolchain (compile, link, asm, cgo, vet, …) from
	// GOROOT/pkg/tool.
	"go": func(real string) []string {
		return []string{filepath.Join(filepath.Dir(filepath.Dir(real)), "pkg", "tool")}
	},
	// gofmt needs nothing; the C compilers run their passes and binutils.
	"gcc": ccHelpers, "cc": ccHelpers, "c++": ccHelpers, "g++": ccHelpers,
}

func ccHelpers(string) []string {
	return []string{"/usr/lib/gcc", "/usr/libexec/gcc", "/usr/bin/as", "/usr/bin/ld", "/usr/bin/ld.bfd", "/usr/bin/ld.gold"}
}

// ExecClosure returns the files and directories that executing programs
// (absolute paths as warden found them) needs executable: each program
// with symlinks resolved, its #! interpreter, its dynamic loader and its
// helpers. pathDirs is the PATH "#!/usr/bin/env NAME" finds NAME on.
func ExecClosure(programs []string, pathDirs []string) []string {
	var out []string
	seen := map[string]bool{}
	var add func(p string, depth int)
	add = func(p string, depth int) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			return
		}
		fi, err := os.Stat(real)
		if err != nil {
			return
		}
		seen[real] = true
		out = append(out, real)
		if fi.IsDir() || depth > 2 {
			return
		}
		for _, q := range interpreters(real, pathDirs) {
			add(q, depth+1)
		}
		for _, name := range []string{filepath.Base(p), filepath.Base(real)} {
			if h, ok := Helpers[name]; ok {
				for _, q := range h(real) {
					add(q, depth+1)
				}
			}
		}
	}
	for _, p := range programs {
		add(p, 0)
	}
	slices.Sort(out)
	return out
}

// interpreters returns what the kernel runs to execute the file at p: the
// #! interpreter of a script (with env's NAME), or an ELF file's loader.
func interpreters(p string, pathDirs []string) []string {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.ReadAt(head, 0)
	head = head[:n]
	if len(head) < 4 {
		return nil
	}
	if string(head[:2]) == "#!" {
		line, _, _ := strings.Cut(string(head[2:]), "\n")
		fields := strings.Fields(line)
		if len(fields) == 0 || !filepath.IsAbs(fields[0]) {
			return nil
		}
		out := []string{fields[0]}
		if filepath.Base(fields[0]) == "env" {
			for _, a := range fields[1:] {
				if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
					continue
				}
				for _, d := range pathDirs {
					if fi, err := os.Stat(filepath.Join(d, a)); err == nil && fi.Mode().IsRegular() {
						out = append(out, filepath.Join(d, a))
						break
					}
				}
				break
			}
		}
		return out
	}
	if string(head[:4]) != elf.ELFMAG {
		return nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err == nil {
				return []string{strings.TrimRight(string(b), "\x00")}
			}
		}
	}
	return nil
}
