package shell

// Environment guards of the shell tool. An exec grant lets a program run;
// it does not let it load code through the environment: the variables
// that change what a program loads or runs are guarded, and every program
// gets warden's hardening. (The argument guards — git -c, find -exec, sed
// e, … — are builtin/internal/argguard.)

import (
	"slices"
	"strings"
	"sync"

	"github.com/wardenrt/warden/builtin/internal/gitcfg"
	"github.com/wardenrt/warden/runtime/capability"
)

// envAllow are the host variables every command gets (when set).
var envAllow = []string{
	"HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE",
	"LC_NUMERIC", "LC_TIME", "TZ", "TERM", "TMPDIR",
}

// envGuardedNames change what code a program (or the programs it runs)
// loads, where it reads its configuration, or which helper it starts. They
// reach a program only with the value warden itself set, or through an
// exact env:NAME grant (never env:* or a prefix grant).
var envGuardedNames = sync.OnceValue(func() map[string]string {
	return map[string]string{
		"PATH": "it decides which programs run", "HOME": "programs read their configuration from it (.gitconfig, .npmrc, …)",
		"XDG_CONFIG_HOME": "programs read their configuration from it",
		"BASH_ENV":        "shells run the file it names", "ENV": "shells run the file it names", "IFS": "it changes how shells split words",
		"CDPATH": "it changes where cd goes", "PS4": "shells expand it", "SHELL": "programs run it as the shell (flock -c, sudo -s, script)", "SHELLOPTS": "it sets shell options", "BASHOPTS": "it sets shell options",
		"PROMPT_COMMAND": "shells run it", "GLOBIGNORE": "it changes globbing",
		"TEXTDOMAIN": "bash expands the translation of a $\"…\" string it names", "TEXTDOMAINDIR": "bash expands the translation of a $\"…\" string from it",
		"PYTHONPATH": "Python loads modules from it", "PYTHONHOME": "Python loads modules from it", "PYTHONSTARTUP": "Python runs the file it names",
		"PYTHONINSPECT": "it changes how Python runs", "PYTHONUSERBASE": "Python loads modules from it",
		"NODE_OPTIONS": "Node.js loads code it names (--require)", "NODE_PATH": "Node.js loads modules from it",
		"PERL5OPT": "Perl loads modules it names", "PERL5LIB": "Perl loads modules from it", "PERLLIB": "Perl loads modules from it", "PERL5DB": "Perl runs it",
		"RUBYOPT": "Ruby loads code it names", "RUBYLIB": "Ruby loads code from it",
		"JAVA_TOOL_OPTIONS": "the JVM loads agents it names", "_JAVA_OPTIONS": "the JVM loads agents it names", "JDK_JAVA_OPTIONS": "the JVM loads agents it names",
		"CLASSPATH": "the JVM loads classes from it", "LUA_INIT": "Lua runs it", "LUA_PATH": "Lua loads modules from it", "LUA_CPATH": "Lua loads modules from it",
		"TCLLIBPATH": "Tcl loads code from it",
		"PAGER":      "programs run it", "MANPAGER": "man runs it", "EDITOR": "programs run it", "VISUAL": "programs run it",
		"LESSOPEN": "less runs it", "LESSCLOSE": "less runs it", "SSH_ASKPASS": "ssh runs it", "SUDO_ASKPASS": "sudo runs it",
		"GCONV_PATH": "glibc loads code from it", "HOSTALIASES": "it redirects name resolution", "LOCPATH": "glibc loads locale data from it",
		"NLSPATH": "it changes which message catalogues load", "GLIBC_TUNABLES": "it changes how glibc behaves",
		"RIPGREP_CONFIG_PATH": "rg reads options (such as --pre) from it", "TAR_OPTIONS": "tar reads options (such as --to-command) from it",
		"ZIPOPT": "zip reads options (such as -TT) from it", "GREP_OPTIONS": "grep reads options from it",
		"CURL_HOME": "curl reads its configuration from it", "WGETRC": "wget reads its configuration from it",
		"MAKEFLAGS": "make reads options from it", "GNUPGHOME": "gpg reads its configuration from it",
	}
})

// envGuardedPrefixes are guarded as families.
var envGuardedPrefixes = []struct{ prefix, why string }{
	{"LD_", "the dynamic loader reads it (LD_PRELOAD loads code into every program)"},
	{"DYLD_", "the dynamic loader reads it"},
	{"BASH_FUNC_", "bash imports functions from it"},
	{"GIT_", "git reads its configuration, helper programs and repository location from it"},
	{"RSYNC_", "rsync runs programs it names"},
}

// gitIdentity are the GIT_ variables that only set names and dates.
var gitIdentity = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true, "GIT_AUTHOR_DATE": true,
		"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true, "GIT_COMMITTER_DATE": true,
	}
})

// envGuarded returns why a variable is guarded, or "".
func envGuarded(name string) string {
	if why, ok := envGuardedNames()[name]; ok {
		return why
	}
	if gitIdentity()[name] {
		return ""
	}
	for _, p := range envGuardedPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.why
		}
	}
	return ""
}

// secretName reports host variable names that look like secrets; they
// are passed only through an exact env:NAME grant.
func secretName(name string) bool {
	u := strings.ToUpper(name)
	for _, w := range []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// exactEnvGrant reports whether the grants hold env:NAME exactly.
func exactEnvGrant(s capability.Set, name string) bool {
	if !s.Allows(capability.Need{Kind: capability.Env, Resource: name}) {
		return false
	}
	for _, g := range s.Grants() {
		if g.Kind() == capability.Env && g.Scope() == name {
			return true
		}
	}
	return false
}

// hardening is added to every program's environment, last, so nothing
// overrides it: no system git configuration, editors that fail instead of
// waiting for a terminal, no terminal prompts, cat as pager, no git://
// proxy program, gitcfg.Hardening at command scope, and git using no
// repository it discovers (gitcfg.SafeOnly). A call whose programs may
// run git adds what turns off the programs the repository's configuration
// names and the repository itself as the one git may use
// (run.gitHardening).
var hardening = sync.OnceValue(func() []string { return hardeningWith(gitcfg.Found{}) })

// hardeningWith is the hardening for the repository found: its
// command-scope settings after gitcfg.Hardening's, under one
// GIT_CONFIG_COUNT, and it alone safe.
func hardeningWith(f gitcfg.Found) []string {
	knob, safe := gitcfg.SafeOnly(f.Safe)
	pairs := append(append(append(slices.Clone(gitcfg.Hardening), gitcfg.NoSubmodules...), f.Pairs...), safe...)
	return append([]string{"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_EDITOR=false",
		"GIT_SEQUENCE_EDITOR=false", "GIT_PROXY_COMMAND=", "GIT_PROTOCOL_FROM_USER=0", "PAGER=cat", knob}, gitcfg.Env(pairs)...)
}
