// Package gitcfg reads a repository's git configuration as git itself
// lists it (git config -z --list) and says how to turn off, at command
// scope, every program it names: filter, diff and merge drivers,
// diff.external, archive filters, a remote's upload-pack, credential
// helpers. Command scope (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>,
// GIT_CONFIG_VALUE_<n>) outranks every configuration file, so git then
// finds the program empty and runs nothing (or fails, which is safe).
//
// The git tools (builtin/git) and git started from the shell
// (builtin/shell) share it; Reader runs git, sandboxed, to find the
// repository and list its configuration the way the shell's programs
// would. The git tools' git reads no user configuration,
// so they turn off whatever the list names (All); the shell's git keeps the
// user's own configuration (a git-lfs filter in ~/.gitconfig), so only what
// the repository's configuration defines — the local and worktree scopes,
// with the files they include — is turned off (Repository).
//
// Which key is turned off how was checked against git 2.39: a driver key
// set to "" at command scope wins over the repository's value (last one
// wins) and git either skips the driver (filters) or refuses to run "" and
// fails (diff and merge drivers, archive filters). Multi-valued keys are
// different: for remote.<n>.uploadpack and .receivepack the first value
// wins, so the repository's would still run; instead the transports that
// run it on this machine or a host it reaches (file, ssh) are refused.
package gitcfg

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Format is how the configuration is listed: with each entry's scope
// (git 2.26 and later) and the file it comes from, and all of it or one
// scope's.
type Format struct {
	Scope, Origin bool
	// Only, "local" or "worktree", lists that scope alone, with the files
	// it includes. git then fails outside a repository — even one named by
	// GIT_DIR, for which a plain listing succeeds, reading whatever
	// config file lies there.
	Only string
}

// Args are git's arguments that list the configuration in this format.
func (f Format) Args() []string {
	a := []string{"config", "-z", "--list"}
	if f.Only != "" {
		a = append(a, "--"+f.Only, "--includes")
	}
	if f.Scope {
		a = append(a, "--show-scope")
	}
	if f.Origin {
		a = append(a, "--show-origin")
	}
	return a
}

// Entry is one value of the configuration.
type Entry struct {
	// Scope is where git found it: system, global, local, worktree or
	// command; "" when the format does not say.
	Scope string
	// Origin is where it was read: "file:<path>", "command line:", …;
	// "" when the format does not say.
	Origin string
	// Key is section.name or section.subsection.name, the section and
	// the name lower-cased by git, the subsection as written.
	Key   string
	Value string
}

// Repository reports whether e belongs to the repository's own
// configuration: the local or worktree scope (with the files they
// include), or an unknown scope, which counts as the repository's.
func (e Entry) Repository() bool {
	return e.Scope == "local" || e.Scope == "worktree" || e.Scope == ""
}

// Parse reads what git printed for f.Args(): NUL-terminated fields, the
// scope and origin (when asked for) and then the key, a newline and the
// value (a key without a value has no newline).
func (f Format) Parse(out []byte) ([]Entry, error) {
	fields := bytes.Split(out, []byte{0})
	if len(fields) > 0 && len(fields[len(fields)-1]) == 0 {
		fields = fields[:len(fields)-1]
	}
	per := 1
	if f.Scope {
		per++
	}
	if f.Origin {
		per++
	}
	if len(fields)%per != 0 {
		return nil, fmt.Errorf("git's configuration list has %d fields, not a multiple of %d", len(fields), per)
	}
	entries := make([]Entry, 0, len(fields)/per)
	for i := 0; i < len(fields); i += per {
		var e Entry
		j := i
		if f.Scope {
			e.Scope = string(fields[j])
			j++
		}
		if f.Origin {
			e.Origin = string(fields[j])
			j++
		}
		key, val, _ := strings.Cut(string(fields[j]), "\n")
		if key == "" {
			return nil, fmt.Errorf("git's configuration list has an entry without a key")
		}
		e.Key, e.Value = key, val
		entries = append(entries, e)
	}
	return entries, nil
}

// Pair is one setting at command scope.
type Pair struct{ Key, Value string }

// Env renders pairs as git's command-scope environment:
// GIT_CONFIG_COUNT, then GIT_CONFIG_KEY_<n> and GIT_CONFIG_VALUE_<n>. Key
// and value stay apart, so a name holding "=" cannot confuse it the way
// `-c key=value` would.
func Env(pairs []Pair) []string {
	if len(pairs) == 0 {
		return nil
	}
	env := make([]string, 0, 1+2*len(pairs))
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(pairs)))
	for i, p := range pairs {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+p.Key, "GIT_CONFIG_VALUE_"+n+"="+p.Value)
	}
	return env
}

// Mode says which entries Overrides turns off.
type Mode int

const (
	// Repository: the programs the repository's own configuration names
	// (Entry.Repository); the user's configuration keeps its own. A filter
	// is turned off when the repository sets its program (process, clean
	// or smudge), not merely its other keys (filter.lfs.required).
	Repository Mode = iota
	// All: the programs any entry but the command line's names, and every
	// filter any key mentions (the git tools, whose git reads no user
	// configuration and runs no filter at all).
	All
)

// Overrides returns the command-scope settings that turn off the programs
// the entries name (see Mode), in the order first found:
//
//   - filter.<n>.process, .clean, .smudge: "" (git skips the filter), and
//     filter.<n>.required=false (git does not fail for want of it);
//   - diff.<n>.command, diff.<n>.textconv, diff.external, merge.<n>.driver,
//     tar.<format>.command, interactive.diffFilter,
//     gpg.ssh.defaultKeyCommand: "" (git refuses to run "" and fails);
//   - credential.<url>.helper: "" (no helper);
//   - man.<tool>.cmd and .path, browser.<tool>.cmd and .path, man.viewer,
//     help.browser, web.browser: "" (the viewers git help runs);
//   - alias.<name>, trailer.<token>.command and .cmd: "" (git fails);
//   - protocol.<name>.allow of another transport than git's own: never,
//     and a repository's protocol.allow: user, git's own transports always;
//   - remote.<n>.uploadpack or .receivepack other than git's own:
//     protocol.file.allow and protocol.ssh.allow never, as the
//     repository's value would win over any other (see the package
//     comment).
func Overrides(entries []Entry, mode Mode) []Pair {
	var out []Pair
	seen := map[string]bool{}
	add := func(key, val string) {
		if !seen[key] {
			seen[key] = true
			out = append(out, Pair{key, val})
		}
	}
	for _, e := range entries {
		if e.Scope == "command" || mode == Repository && !e.Repository() {
			continue
		}
		section, sub, name := split(e.Key)
		switch {
		case section == "filter" && sub != "" && (mode == All || name == "process" || name == "clean" || name == "smudge"):
			for _, n := range []string{"process", "clean", "smudge"} {
				add("filter."+sub+"."+n, "")
			}
			add("filter."+sub+".required", "false")
		case section == "diff" && sub != "" && (name == "command" || name == "textconv"),
			section == "merge" && sub != "" && name == "driver",
			section == "tar" && sub != "" && name == "command",
			section == "credential" && sub != "" && name == "helper":
			add(e.Key, "")
		case e.Key == "diff.external", e.Key == "interactive.difffilter", e.Key == "gpg.ssh.defaultkeycommand":
			add(e.Key, "")
		case (section == "man" || section == "browser") && sub != "" && (name == "cmd" || name == "path"),
			e.Key == "help.browser", e.Key == "web.browser", e.Key == "man.viewer":
			add(e.Key, "") // the viewers of git help (refused by the shell too)
		case section == "alias" && sub == "",
			section == "trailer" && sub != "" && (name == "command" || name == "cmd"):
			// git runs an alias for a command it starts itself (git
			// remote-<helper> for foo::url, git merge-<strategy>): ""
			// makes git fail ("'' is not a git command"); a trailer
			// command "" fails to run.
			add(e.Key, "")
		case section == "protocol" && sub == "" && name == "allow":
			// A default the repository sets would let through the
			// helpers of unknown transports (GIT_PROTOCOL_FROM_USER=0
			// refuses them under git's own default, "user").
			add("protocol.allow", "user")
			for _, p := range []string{"http", "https", "git", "ssh"} {
				add("protocol."+p+".allow", "always")
			}
		case section == "protocol" && sub != "" && name == "allow" && !slices.Contains([]string{"http", "https", "git", "ssh", "file", "ext"}, sub):
			add(e.Key, "never")
		case section == "remote" && sub != "" && (name == "uploadpack" && e.Value != "git-upload-pack" ||
			name == "receivepack" && e.Value != "git-receive-pack"):
			add("protocol.file.allow", "never")
			add("protocol.ssh.allow", "never")
		}
	}
	return out
}

// split cuts a key into its section, subsection ("" for none) and name.
func split(key string) (section, sub, name string) {
	first := strings.IndexByte(key, '.')
	last := strings.LastIndexByte(key, '.')
	if first < 0 {
		return key, "", ""
	}
	if first == last {
		return key[:first], "", key[first+1:]
	}
	return key[:first], key[first+1 : last], key[last+1:]
}
