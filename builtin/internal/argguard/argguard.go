// Package argguard holds the argument guards of the shell: an exec grant
// lets a program run; it does not let it run other programs, read its
// configuration from where the caller chooses, or write files outside the
// shell's checks. Check refuses the options of common programs that do
// that. Programs that exist to run other programs (shells, interpreters,
// launchers such as env, xargs, timeout, nice) are not guarded here: the
// sandbox holds what they start to the call's exec grants (Landlock's
// execute right per file), and the shell reads what they launch.
package argguard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wardenrt/warden/builtin/internal/getopt"
)

// Result is a guard's verdict on one argv.
type Result struct {
	Reason string   // non-empty: refused
	Hint   string   // what to do instead
	Writes []string // files the program will write (sed -i): they need fs.write
}

// Guarded reports whether Check has a guard for program name: its
// arguments can make it run a program or write a file.
func Guarded(name string) bool {
	switch name {
	case "git", "find", "rg", "sed", "tar", "sort", "split", "rsync", "scp", "zip":
		return true
	}
	return false
}

// Check checks the arguments of program name (a base name).
func Check(name string, args []string) Result {
	switch name {
	case "git":
		return guardGit(args)
	case "find":
		for _, a := range args {
			switch {
			case a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir":
				return Result{Reason: "find " + a + " runs programs outside the shell's checks", Hint: "pipe find's output into the program instead (find … -print0 | …), with an exec grant for it"}
			case a == "-delete":
				return Result{Reason: "find -delete removes files outside the shell's checks", Hint: "list the files with find and remove them with fs_remove"}
			case strings.HasPrefix(a, "-fprint") || a == "-fls":
				return Result{Reason: "find " + a + " writes a file outside the shell's checks", Hint: "use -print and a redirection (> file) instead"}
			}
		}
	case "rg":
		for _, a := range args {
			if a == "--" {
				break
			}
			if a == "--pre" || strings.HasPrefix(a, "--pre=") {
				return Result{Reason: "rg --pre runs a program on every file searched", Hint: "search without --pre"}
			}
		}
	case "sed":
		return guardSed(args)
	case "tar":
		return guardTar(args)
	case "sort":
		for _, a := range args {
			if abbreviates(a, []string{"--compress-program"}) != "" { // --compress= too
				return Result{Reason: "sort --compress-program runs a program", Hint: "sort without --compress-program"}
			}
		}
	case "split":
		for _, a := range args {
			if a == "--" {
				break
			}
			if abbreviates(a, []string{"--filter"}) != "" {
				return Result{Reason: "split --filter runs a shell command for each piece", Hint: "split into files, then run the command on them"}
			}
		}
	case "rsync":
		for _, a := range args {
			if a == "-e" || strings.HasPrefix(a, "--rsh") || strings.HasPrefix(a, "--rsync-path") || abbreviates(a, []string{"--rsh", "--rsync-path"}) != "" ||
				(strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "e")) {
				return Result{Reason: "rsync -e / --rsh / --rsync-path name programs rsync runs", Hint: "copy local files with cp, or grant ssh/rsync as a launcher and use a shell yourself"}
			}
		}
	case "scp":
		for _, a := range args {
			if strings.HasPrefix(a, "-S") || strings.HasPrefix(a, "-o") || strings.HasPrefix(a, "-F") {
				return Result{Reason: "scp " + a[:2] + " names a program or ssh options (ProxyCommand) scp runs", Hint: "use scp without -S, -o and -F"}
			}
		}
	case "zip":
		for _, a := range args {
			if a == "-TT" || strings.HasPrefix(a, "--unzip-command") || abbreviates(a, []string{"--unzip-command"}) != "" {
				return Result{Reason: "zip -TT runs a program to test the archive", Hint: "test the archive with unzip -t"}
			}
		}
	}
	return Result{}
}

// abbreviates returns the option of dangerous that the long option word
// a (--name or --name=value) names, in full or by a prefix of it, as
// getopt_long and git's option parser accept (--to-com= is --to-command);
// "" when it names none. A prefix several options share is ambiguous to
// the program, which refuses it; it is refused here too. exact are the
// program's options that are themselves a prefix of a dangerous one
// (tar's --checkpoint): they name only themselves.
func abbreviates(a string, dangerous []string, exact ...string) string {
	opt, _, _ := strings.Cut(a, "=")
	if !strings.HasPrefix(opt, "--") || len(opt) < 3 {
		return ""
	}
	for _, e := range exact {
		if opt == e {
			return ""
		}
	}
	for _, d := range dangerous {
		if strings.HasPrefix(d, opt) {
			return d
		}
	}
	return ""
}

// gitCommands are the git subcommands the shell runs. Anything else —
// aliases (which can be "!program"), difftool, mergetool, filter-branch,
// submodule foreach, send-email, maintenance, help (a browser or man viewer
// from the configuration) — is refused: each can run a program that git's
// configuration or arguments name.
var gitCommands = map[string]bool{
	"add": true, "am": true, "annotate": true, "apply": true, "archive": true, "bisect": true, "blame": true,
	"branch": true, "bundle": true, "cat-file": true, "check-attr": true, "check-ignore": true,
	"check-mailmap": true, "check-ref-format": true, "checkout": true, "checkout-index": true, "cherry": true,
	"cherry-pick": true, "clean": true, "clone": true, "column": true, "commit": true, "commit-graph": true,
	"commit-tree": true, "config": true, "count-objects": true, "describe": true, "diff": true, "diff-files": true,
	"diff-index": true, "diff-tree": true, "fetch": true, "fmt-merge-msg": true, "for-each-ref": true,
	"format-patch": true, "fsck": true, "gc": true, "get-tar-commit-id": true, "grep": true, "hash-object": true,
	"init": true, "interpret-trailers": true, "log": true, "ls-files": true, "ls-remote": true, "ls-tree": true,
	"mailinfo": true, "mailsplit": true, "merge": true, "merge-base": true, "merge-file": true, "merge-tree": true,
	"mktag": true, "mktree": true, "mv": true, "name-rev": true, "notes": true, "patch-id": true, "prune": true,
	"pull": true, "push": true, "range-diff": true, "read-tree": true, "rebase": true, "reflog": true,
	"remote": true, "repack": true, "replace": true, "request-pull": true, "rerere": true, "reset": true,
	"restore": true, "rev-list": true, "rev-parse": true, "revert": true, "rm": true, "shortlog": true,
	"show": true, "show-branch": true, "show-ref": true, "sparse-checkout": true, "stash": true, "status": true,
	"stripspace": true, "switch": true, "symbolic-ref": true, "tag": true, "update-index": true,
	"update-ref": true, "var": true, "verify-commit": true, "verify-pack": true, "verify-tag": true,
	"version": true, "whatchanged": true, "worktree": true, "write-tree": true,
}

// gitGlobalOptions are git's own options (before the command) the shell
// passes: output, paging and pathspec switches. The others are refused
// above or here — --bare among them: it names the directory git runs in as
// the repository, which git then uses without its ownership check.
var gitGlobalOptions = map[string]bool{
	"-p": true, "--paginate": true, "-P": true, "--no-pager": true, "--no-replace-objects": true,
	"--literal-pathspecs": true, "--glob-pathspecs": true, "--noglob-pathspecs": true, "--icase-pathspecs": true,
	"--no-optional-locks": true, "--namespace": true, "--super-prefix": true, "--version": true, "-v": true,
	"--exec-path": true, "--html-path": true, "--man-path": true, "--info-path": true, "--list-cmds": true,
}

// gitDangerous are the long options of git's subcommands that run a
// program or write a file; clone's and init's --config and --template
// are added for them.
var gitDangerous = []string{"--output", "--ext-diff", "--textconv", "--upload-pack", "--receive-pack", "--exec", "--open-files-in-pager"}

// guardGit refuses git options that make git run a program or read a
// configuration the caller chooses. The shell also hardens every program's
// environment (hardening): the fixed keys that name programs (core.fsmonitor,
// core.pager, …) and the drivers the repository's configuration names
// (run.gitHardening) are neutralised at command scope, so a repository's
// own .git/config cannot make them run code either.
func guardGit(args []string) Result {
	cfg := func(opt string) Result {
		return Result{
			Reason: "git " + opt + " sets configuration, and git configuration can name programs git runs (core.pager, core.fsmonitor, core.sshCommand, alias.*=!…)",
			Hint:   "run git without " + opt,
		}
	}
	i := 0
global:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" || strings.HasPrefix(a, "-c"):
			return cfg("-c")
		case a == "--config-env" || strings.HasPrefix(a, "--config-env="):
			return cfg("--config-env")
		case strings.HasPrefix(a, "--exec-path="):
			return Result{Reason: "git --exec-path=DIR runs git's helper programs from DIR", Hint: "run git without --exec-path"}
		case a == "-C":
			return Result{Reason: "git -C moves git to another directory outside the shell's checks", Hint: "set cwd, or cd into the directory first"}
		case a == "--git-dir" || strings.HasPrefix(a, "--git-dir=") || a == "--work-tree" || strings.HasPrefix(a, "--work-tree="):
			return Result{Reason: "git " + strings.SplitN(a, "=", 2)[0] + " points git at another repository, whose configuration is not checked", Hint: "set cwd to the repository instead"}
		case a == "--namespace" || a == "--super-prefix":
			i++
		case a == "--":
			i++
			break global
		case strings.HasPrefix(a, "-"):
			if opt, _, _ := strings.Cut(a, "="); !gitGlobalOptions[opt] {
				return Result{Reason: "git " + a + " is not one of git's options the shell passes (--bare, for one, makes git use the directory it runs in as a repository without checking whose it is)",
					Hint: "run git without " + opt}
			}
		default:
			break global
		}
	}
	if i >= len(args) {
		return Result{}
	}
	sub, rest := args[i], args[i+1:]
	if !gitCommands[sub] {
		return Result{
			Reason: fmt.Sprintf("git %s is not a git command the shell runs (aliases, difftool, mergetool, filter-branch, submodule, help and other helpers can run programs)", sub),
			Hint:   "spell out the git command the alias stands for, or use the git tools",
		}
	}
	short := func(a string, letters string) bool {
		return strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a[1:], letters)
	}
	for j, a := range rest {
		if a == "--" {
			break
		}
		if a == "--help" {
			// git turns `git CMD --help` into `git help CMD`, which runs
			// the man or web viewer the configuration names.
			return Result{Reason: "git " + sub + " --help runs a manual viewer the configuration can name", Hint: "use git " + sub + " -h for its usage"}
		}
		opt := a
		if k := strings.IndexByte(a, '='); k > 0 && strings.HasPrefix(a, "--") {
			opt = a[:k]
		}
		dangerous := gitDangerous
		if sub == "clone" || sub == "init" {
			dangerous = append(slices.Clone(gitDangerous), "--config", "--template")
		}
		if d := abbreviates(a, dangerous, "--text"); d != "" {
			opt = d // git reads a long option by any unambiguous prefix
		}
		switch opt {
		case "--output":
			return Result{Reason: "git --output writes a file outside the shell's redirection checks", Hint: "redirect git's output with > file instead"}
		case "--ext-diff", "--textconv":
			return Result{Reason: "git " + opt + " runs the diff programs the configuration names", Hint: "run git without " + opt + " (or with --no-" + opt[2:] + ")"}
		case "--upload-pack", "--receive-pack", "--exec":
			return Result{Reason: "git " + opt + " names a program git runs", Hint: "run git without " + opt}
		case "--open-files-in-pager":
			return Result{Reason: "git grep --open-files-in-pager runs a program", Hint: "run git grep without -O"}
		}
		if r := gitSubmoduleOption(a); r.Reason != "" {
			return r
		}
		switch sub {
		case "clone", "init":
			if opt == "--config" || opt == "--template" || (sub == "clone" && short(a, "cu")) {
				return Result{Reason: "git " + sub + " " + a + " sets configuration, templates (hooks) or the upload-pack program", Hint: "run git " + sub + " without it"}
			}
		case "archive", "format-patch":
			if short(a, "o") || sub == "format-patch" && abbreviates(a, []string{"--output-directory"}) != "" {
				return Result{Reason: "git " + sub + " " + a + " writes files outside the shell's redirection checks", Hint: "write to standard output (git archive … > file, git format-patch --stdout > file)"}
			}
		case "rebase":
			if short(a, "x") {
				return Result{Reason: "git rebase -x runs a command after each commit", Hint: "rebase without -x / --exec"}
			}
		case "grep":
			if short(a, "O") {
				return Result{Reason: "git grep -O runs a pager program", Hint: "run git grep without -O"}
			}
		case "bisect":
			if j == 0 && a == "run" {
				return Result{Reason: "git bisect run runs a command", Hint: "run the bisect steps one by one"}
			}
			if j == 0 && (a == "view" || a == "visualize") {
				return Result{Reason: "git bisect " + a + " runs gitk, or the git command its words name (difftool among them)", Hint: "use git log to look at the commits left"}
			}
		}
	}
	if sub == "clone" && !gitCloneWithoutCheckout(rest) {
		return Result{Reason: "git clone checks the files out with the new repository's configuration, which the command could rewrite while it runs",
			Hint: "clone with --no-checkout (-n), --bare or --mirror"}
	}
	if sub == "config" && !gitConfigRead(rest) {
		return Result{Reason: "git config can only be read from the shell: a written key can make git run a program (core.fsmonitor, alias.*=!…, diff.external)", Hint: "change git configuration outside warden"}
	}
	return Result{}
}

// gitSubmoduleOption refuses the options that make git start git inside a
// submodule — found in the index or in any tree of the history — where
// git names the submodule's repository itself, so its configuration is
// used without the ownership check the shell relies on.
func gitSubmoduleOption(a string) Result {
	_, val, _ := strings.Cut(a, "=")
	switch abbreviates(a, []string{"--recurse-submodules", "--recursive", "--submodule"}) { // by any prefix, as git reads them
	case "--recurse-submodules", "--recursive":
		if val == "no" {
			break
		}
		return Result{Reason: "git " + a + " runs git inside the submodules, with their own configuration", Hint: "leave submodules out (--no-recurse-submodules), or use the git tools"}
	case "--submodule":
		if val != "diff" {
			break
		}
		return Result{Reason: "git --submodule=diff runs git inside the submodules, with their own configuration", Hint: "use --submodule=log or --submodule=short"}
	}
	return Result{}
}

// gitCloneWithoutCheckout reports whether git clone's arguments check no
// files out.
func gitCloneWithoutCheckout(rest []string) bool {
	for _, a := range rest {
		if a == "--" {
			break
		}
		if a == "--no-checkout" || a == "--bare" || a == "--mirror" {
			return true
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") {
			for _, c := range a[1:] {
				if c == 'n' {
					return true
				}
				if strings.ContainsRune("obucj", c) { // the rest is the option's value
					break
				}
			}
		}
	}
	return false
}

// gitConfigRead reports whether git config's arguments only read.
func gitConfigRead(rest []string) bool {
	if len(rest) > 0 && (rest[0] == "get" || rest[0] == "list") {
		for _, a := range rest[1:] {
			if a == "-e" || a == "--edit" {
				return false
			}
		}
		return true
	}
	read := false
	for _, a := range rest {
		opt, _, _ := strings.Cut(a, "=")
		switch opt {
		case "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool", "-l", "--list":
			read = true
		case "-e", "--edit", "--add", "--replace-all", "--unset", "--unset-all", "--rename-section", "--remove-section":
			return false
		}
	}
	return read
}

// tarDangerous are tar's long options that run programs.
var tarDangerous = []string{"--to-command", "--use-compress-program", "--checkpoint-action", "--rsh-command", "--info-script", "--new-volume-script"}

// guardTar refuses tar options that run programs.
func guardTar(args []string) Result {
	refuse := Result{Reason: "tar's --to-command, -I / --use-compress-program, --checkpoint-action, --rsh-command, -F / --info-script and --new-volume-script run programs", Hint: "use tar with its built-in compression options (-z, -j, -J) only"}
	for i, a := range args {
		if abbreviates(a, tarDangerous, "--checkpoint") != "" {
			return refuse // tar reads a long option by any unambiguous prefix
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a[1:], "IF") {
			return refuse
		}
		// Old-style letters (tar xvf …) in the first argument.
		if i == 0 && !strings.HasPrefix(a, "-") && strings.ContainsAny(a, "IF") {
			return refuse
		}
	}
	return Result{}
}

// sedLong are GNU sed 4.9's long options.
var sedLong = getopt.Table{Long: "binary=b debug expression=e: file=f: follow-symlinks in-place=i:: line-length=l: null-data=z " +
	"zero-terminated=z posix quiet=n silent=n regexp-extended=r sandbox separate=s unbuffered=u help version"}

// guardSed refuses sed scripts with the e and w/W commands or the e and w
// flags of s (which run programs and write files outside the shell's
// checks), and scripts from files (-f), which cannot be checked. In-place
// edits (-i) are allowed: the files they write are returned for fs.write
// checks.
func guardSed(args []string) Result {
	var scripts, files []string
	inPlace, haveScript := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			files = append(files, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			// sed reads long options by any unambiguous prefix (--expr=).
			name, v, eq := strings.Cut(a[2:], "=")
			key, kind, ok := sedLong.Resolve(name)
			switch {
			case !ok || kind == getopt.None && eq:
				return Result{Reason: "warden cannot read sed's option " + a + " (unknown, or an ambiguous prefix)", Hint: "spell sed's long options in full"}
			case key == "f":
				return Result{Reason: "sed -f reads its script from a file warden cannot check", Hint: "pass the script with -e"}
			case kind == getopt.Required && !eq:
				if i++; i < len(args) {
					v = args[i]
				}
			}
			switch key {
			case "i":
				inPlace = true
			case "e":
				scripts, haveScript = append(scripts, v), true
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
		cluster:
			for k := 1; k < len(a); k++ {
				switch a[k] {
				case 'i':
					inPlace = true
					break cluster // the rest is the backup suffix
				case 'e':
					if k+1 < len(a) {
						scripts = append(scripts, a[k+1:])
					} else if i+1 < len(args) {
						i++
						scripts = append(scripts, args[i])
					}
					haveScript = true
					break cluster
				case 'f':
					return Result{Reason: "sed -f reads its script from a file warden cannot check", Hint: "pass the script with -e"}
				case 'l':
					if k+1 == len(a) {
						i++
					}
					break cluster
				}
			}
		default:
			if !haveScript {
				scripts = append(scripts, a)
				haveScript = true
			} else {
				files = append(files, a)
			}
		}
	}
	if why := SedScriptRefusal(strings.Join(scripts, "\n")); why != "" {
		return Result{Reason: why, Hint: "remove the e / w commands and the s///e and s///w flags; write output with a redirection"}
	}
	if inPlace {
		return Result{Writes: files}
	}
	return Result{}
}

// SedScriptRefusal reads a (GNU) sed script and returns why it is
// refused: it has an e, w or W command or an s command with the e or w flag,
// or it cannot be read with certainty.
func SedScriptRefusal(s string) string {
	r := &sedReader{s: s, n: len(s)}
	for {
		for r.i < r.n && (s[r.i] == ' ' || s[r.i] == '\t' || s[r.i] == '\n' || s[r.i] == ';') {
			r.i++
		}
		if r.i >= r.n {
			return ""
		}
		if s[r.i] == '#' {
			r.toEOL()
			continue
		}
		if !r.address() {
			return "warden cannot read this sed script (an unterminated address)"
		}
		r.skipSpace()
		if r.i < r.n && s[r.i] == ',' {
			r.i++
			r.skipSpace()
			if !r.address() {
				return "warden cannot read this sed script (an unterminated address)"
			}
			r.skipSpace()
		}
		for r.i < r.n && (s[r.i] == '!' || s[r.i] == ' ' || s[r.i] == '\t') {
			r.i++
		}
		if r.i >= r.n {
			return ""
		}
		c := s[r.i]
		r.i++
		if why := r.command(c); why != "" {
			return why
		}
	}
}

// sedReader reads a sed script s of n bytes; i is where it is.
type sedReader struct {
	s    string
	i, n int
}

func (r *sedReader) skipSpace() {
	for r.i < r.n && (r.s[r.i] == ' ' || r.s[r.i] == '\t') {
		r.i++
	}
}

func (r *sedReader) toEOL() {
	for r.i < r.n && r.s[r.i] != '\n' {
		r.i++
	}
}

// toEnd skips a label (of :, b, t, T) or v's version: blanks, then the
// label, which GNU sed ends at a blank too, not only at ; or a newline —
// what follows a blank is the next command (sed ':a e date' runs date).
func (r *sedReader) toEnd() {
	for r.i < r.n && (r.s[r.i] == ' ' || r.s[r.i] == '\t') {
		r.i++
	}
	for r.i < r.n && r.s[r.i] != '\n' && r.s[r.i] != ';' && r.s[r.i] != ' ' && r.s[r.i] != '\t' {
		r.i++
	}
}

// delimited reads a delimited part starting after its opening delimiter.
func (r *sedReader) delimited(d byte) bool {
	for r.i < r.n {
		switch {
		case r.s[r.i] == '\\' && r.i+1 < r.n:
			r.i += 2
		case r.s[r.i] == d:
			r.i++
			return true
		case r.s[r.i] == '\n' && d != '\n':
			return false
		default:
			r.i++
		}
	}
	return false
}

// address reads an address, if there is one; false: it is unterminated.
func (r *sedReader) address() bool {
	s, n := r.s, r.n
	switch {
	case r.i < n && s[r.i] >= '0' && s[r.i] <= '9':
		for r.i < n && (s[r.i] >= '0' && s[r.i] <= '9' || s[r.i] == '~') {
			r.i++
		}
	case r.i < n && s[r.i] == '$':
		r.i++
	case r.i < n && s[r.i] == '/':
		r.i++
		if !r.delimited('/') {
			return false
		}
	case r.i+1 < n && s[r.i] == '\\':
		d := s[r.i+1]
		r.i += 2
		if !r.delimited(d) {
			return false
		}
	case r.i < n && (s[r.i] == '+' || s[r.i] == '~'):
		r.i++
		for r.i < n && s[r.i] >= '0' && s[r.i] <= '9' {
			r.i++
		}
	default:
		return true
	}
	for r.i < n && (s[r.i] == 'I' || s[r.i] == 'M') {
		r.i++
	}
	return true
}

// command reads the rest of command c and returns why it is refused ("":
// it is not).
func (r *sedReader) command(c byte) string {
	s, n := r.s, r.n
	switch c {
	case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
	case 'l', 'q', 'Q', 'L':
		r.skipSpace()
		for r.i < n && s[r.i] >= '0' && s[r.i] <= '9' {
			r.i++
		}
	case 'a', 'i', 'c':
		// Text up to an unescaped end of line.
		for r.i < n && s[r.i] != '\n' {
			if s[r.i] == '\\' && r.i+1 < n {
				r.i++
			}
			r.i++
		}
	case ':', 'b', 't', 'T', 'v':
		r.toEnd()
	case 'r', 'R':
		r.toEOL()
	case 'e':
		return "the sed e command runs a program"
	case 'w', 'W':
		return "the sed " + string(c) + " command writes a file outside the shell's checks"
	case 's':
		return r.substitute()
	case 'y':
		if r.i >= n || s[r.i] == '\\' || s[r.i] == '\n' {
			return "warden cannot read this sed script (a y command without a delimiter)"
		}
		d := s[r.i]
		r.i++
		if !r.delimited(d) || !r.delimited(d) {
			return "warden cannot read this sed script (an unterminated y command)"
		}
	default:
		return fmt.Sprintf("warden cannot read this sed script (unknown command %q)", c)
	}
	return ""
}

// substitute reads the rest of an s command: its pattern, replacement and
// flags. It refuses the e and w flags.
func (r *sedReader) substitute() string {
	s, n := r.s, r.n
	if r.i >= n || s[r.i] == '\\' || s[r.i] == '\n' {
		return "warden cannot read this sed script (an s command without a delimiter)"
	}
	d := s[r.i]
	r.i++
	if !r.delimited(d) || !r.delimited(d) {
		return "warden cannot read this sed script (an unterminated s command)"
	}
	for r.i < n {
		f := s[r.i]
		switch {
		case f == 'e':
			return "the e flag of the sed s command runs the pattern space as a program"
		case f == 'w':
			return "the w flag of the sed s command writes a file outside the shell's checks"
		case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || f >= '0' && f <= '9':
			r.i++
			continue
		}
		break
	}
	return ""
}

// RiskWarnings returns the warnings people expect: destructive rm
// and git commands.
func RiskWarnings(name string, args []string) []string {
	has := func(opts ...string) bool {
		for _, a := range args {
			for _, o := range opts {
				if a == o {
					return true
				}
			}
		}
		return false
	}
	shortHas := func(letters string) bool {
		for _, a := range args {
			if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a[1:], letters) {
				return true
			}
		}
		return false
	}
	switch name {
	case "rm":
		if shortHas("rRf") || has("--recursive", "--force") {
			return []string{"rm " + strings.Join(flags(args), " ") + " deletes files without asking and cannot be undone"}
		}
	case "git":
		sub := ""
		var rest []string
		for i, a := range args {
			if !strings.HasPrefix(a, "-") {
				sub, rest = a, args[i+1:]
				break
			}
		}
		args = rest
		switch {
		case sub == "reset" && has("--hard", "--merge", "--keep"):
			return []string{"git reset --hard discards uncommitted changes"}
		case sub == "clean" && (shortHas("fdxX") || has("--force")):
			return []string{"git clean deletes untracked files"}
		case sub == "push" && (shortHas("fd") || has("--force", "--force-with-lease", "--mirror", "--delete", "--prune")):
			return []string{"git push " + strings.Join(flags(args), " ") + " rewrites or deletes remote history"}
		case sub == "branch" && (shortHas("D") || has("--force") && has("--delete")):
			return []string{"git branch -D deletes a branch even if it is not merged"}
		case (sub == "checkout" || sub == "switch") && (shortHas("f") || has("--force", "--discard-changes", ".", "--")):
			return []string{"git " + sub + " can overwrite uncommitted changes"}
		case sub == "restore" && !has("--staged", "-S"):
			return []string{"git restore discards uncommitted changes in the working tree"}
		case sub == "stash" && len(args) > 0 && (args[0] == "drop" || args[0] == "clear"):
			return []string{"git stash " + args[0] + " deletes stashed changes"}
		case sub == "rebase" || sub == "commit" && has("--amend"):
			return []string{"git " + sub + " rewrites history"}
		case sub == "update-ref" && shortHas("d"):
			return []string{"git update-ref -d deletes a ref"}
		}
	}
	return nil
}

func flags(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}
