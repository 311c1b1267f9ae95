package git

import (
	"context"
	"fmt"
	"strings"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// ---- git_commit -----------------------------------------------------------

// commitTool is git_commit. As designed ("no-op with a warning
// unless the policy allows commits: git.write and a rule"), a call is never
// refused for want of either: the gate lets it through on git.read, and Run
// commits only when
//
//   - the call's grants allow git.write, and
//   - the policy rule that matched the call (tool.Call.Rule) is an
//     allow rule written for the git tools: its tool pattern starts with
//     "git" (git_commit itself, git_*, …).
//
// A catch-all rule (`*`, `?*`, `*_*`, …) matching git_commit does not
// count: it says "allow everything", not "allow commits", so the owner has
// not decided about commits. Telling the catch-all apart by what it matches
// would need the list of every tool; a pattern that starts with the literal
// "git" cannot match anything outside the git family, which is the test.
// The rule's require_approval / dry_run_first are the gate's business (the
// default policy has {tool: git_commit, action: allow, require_approval:
// true}); an action: deny rule refuses the call before Run, with
// POLICY_DENIED.
//
// Otherwise the call succeeds, changes nothing, and says exactly what is
// missing in a warning and in data (committed=false, allowed=false,
// missing). So a model is told why nothing happened instead of meeting a
// denial it may try to route around.
type commitTool struct{ g *runner }

// commitRuleExample is the rule that allows commits, as the warning
// shows it.
const commitRuleExample = "{tool: git_commit, action: allow, require_approval: true}"

// commitPermission says whether the call may commit, and if not, what is
// missing: each entry one thing the owner must add.
func commitPermission(c *tool.Call) (missing []string) {
	if !c.Grants.Allows(capability.Need{Kind: capability.GitWrite}) {
		missing = append(missing, "the git.write grant (in the policy's grants, or given for the call)")
	}
	switch r := c.Rule; {
	case r == nil:
		missing = append(missing, "a policy rule allowing git_commit (no rule matches it): add "+commitRuleExample)
	case !r.Allow:
		missing = append(missing, fmt.Sprintf("a policy rule allowing git_commit (the rule that matches, %s, does not allow): change it to %s", r.Text, commitRuleExample))
	case !strings.HasPrefix(r.Tool, "git"):
		missing = append(missing, fmt.Sprintf("a policy rule written for git_commit (the rule that matches, %s, does not name the git tools: "+
			"a broad pattern such as * does not allow commits): add %s before it", r.Text, commitRuleExample))
	}
	return missing
}

// noCommit is the warning of a commit the policy does not allow; would
// is "would be made" in a preview, "made" otherwise.
func noCommit(would string, missing []string) string {
	return "no commit " + would + ": the policy does not allow commits; missing " + strings.Join(missing, "; and ")
}

func (t *commitTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "git_commit",
		Description: "Commit the staged changes (all:true: every change to tracked files) of the workspace's git repository with a message. " +
			"Hooks and signing never run. Unless the policy allows commits (the git.write grant and a rule for git_commit) it commits nothing and returns a warning saying what is missing.",
		Capabilities: []capability.Kind{capability.GitRead, capability.GitWrite},
	}
}

type commitArgs struct {
	Message string `json:"message" minLength:"1" maxLength:"65536" jsonschema:"the commit message (first line: a short summary)"`
	All     bool   `json:"all,omitempty" jsonschema:"first stage every change to tracked files, like git commit -a (new files are not added); default false: commit what is staged"`
}

func (a *commitArgs) check() *tool.Error {
	if strings.TrimSpace(a.Message) == "" {
		return tool.Errorf(tool.CodeInvalidInput, "give a commit message", "the commit message is blank")
	}
	if strings.IndexByte(a.Message, 0) >= 0 {
		return tool.Errorf(tool.CodeInvalidInput, "remove the NUL byte from the message", "the commit message contains a NUL byte")
	}
	return nil
}

// Needs is git.read only; git.write is checked in Run (see commitTool).
func (t *commitTool) Needs(c *tool.Call, a *commitArgs) ([]capability.Need, error) {
	if e := a.check(); e != nil {
		return nil, e
	}
	return readNeeds(), nil
}

// CommitResult is git_commit's data.
type CommitResult struct {
	Committed bool `json:"committed"`
	// Allowed is whether the policy allows commits; when it does not,
	// Missing lists what it lacks (the git.write grant, a rule).
	Allowed bool       `json:"allowed"`
	Missing []string   `json:"missing,omitempty"`
	Commit  string     `json:"commit,omitempty"`
	Branch  string     `json:"branch,omitempty"`
	Message string     `json:"message"`
	All     bool       `json:"all"`
	Files   []FileStat `json:"files"`
	Stat    string     `json:"stat,omitempty"`
	Argv    []string   `json:"argv"`
}

func commitArgv(all bool) []string {
	args := []string{"commit", "--no-verify", "--no-gpg-sign", "--file=-"}
	if all {
		args = append(args, "--all")
	}
	return args
}

// Preview says whether a commit would be made, with which message, and what
// it would contain: git diff --cached --stat (with all: every tracked
// change against HEAD). It reads only, with git's optional locks off.
func (t *commitTool) Preview(ctx context.Context, c *tool.Call, a *commitArgs) tool.Outcome {
	if e := a.check(); e != nil {
		return tool.Outcome{Err: e}
	}
	missing := commitPermission(c)
	res := CommitResult{Allowed: len(missing) == 0, Missing: missing, Message: a.Message, All: a.All, Argv: gitArgv(commitArgv(a.All)...), Files: []FileStat{}}
	s, e := t.g.open(ctx, c, true)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer s.close()
	unborn, e := s.unborn()
	if e != nil {
		return tool.Outcome{Err: e}
	}
	base := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty", "-M"}
	var against []string
	switch {
	case !a.All:
		against = []string{"--cached"}
	case unborn:
		tree, e := s.emptyTree()
		if e != nil {
			return tool.Outcome{Err: e}
		}
		against = []string{"--end-of-options", tree}
	default:
		against = []string{"--end-of-options", "HEAD"}
	}
	mk := func(flags ...string) []string {
		x := append(append([]string{}, base...), flags...)
		return append(append(x, against...), "--")
	}
	raw, e := s.run(nil, maxParse, mk("-z", "--raw", "--numstat")...)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if raw.Code != 0 {
		return tool.Outcome{Err: s.fail(raw, "diff")}
	}
	res.Files, _, _ = parseRawNumstat(raw.Stdout)
	stat, e := s.run(nil, t.g.o.MaxOutput, mk("--stat")...)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if stat.Code != 0 {
		return tool.Outcome{Err: s.fail(stat, "diff")}
	}
	res.Stat = strings.TrimRight(textOut(stat.Stdout, stat.Truncated, t.g.o.MaxOutput), "\n")
	var warnings []string
	var sb strings.Builder
	if !res.Allowed {
		w := noCommit("would be made", missing)
		warnings = append(warnings, w)
		sb.WriteString(w + ".\nWere commits allowed, it would run:\n")
	} else {
		sb.WriteString("would run:\n")
	}
	fmt.Fprintf(&sb, "  %s\nwith the message:\n%s\n\n", quoteArgv(res.Argv), indent(a.Message))
	if len(res.Files) == 0 {
		sb.WriteString("nothing to commit: ")
		if a.All {
			sb.WriteString("no tracked file has changed\n")
		} else {
			sb.WriteString("nothing is staged (all:true commits every change to tracked files)\n")
		}
		warnings = append(warnings, "nothing to commit")
	} else {
		fmt.Fprintf(&sb, "%d file(s) would be committed:\n%s\n", len(res.Files), res.Stat)
	}
	return tool.Outcome{Output: sb.String(), Data: res, Warnings: warnings}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func (t *commitTool) Run(ctx context.Context, c *tool.Call, a *commitArgs) tool.Outcome {
	if e := a.check(); e != nil {
		return tool.Outcome{Err: e}
	}
	missing := commitPermission(c)
	res := CommitResult{Allowed: len(missing) == 0, Missing: missing, Message: a.Message, All: a.All, Argv: gitArgv(commitArgv(a.All)...), Files: []FileStat{}}
	if !res.Allowed {
		w := noCommit("made", missing)
		return tool.Outcome{Output: w, Data: res, Warnings: []string{w}}
	}
	s, e := t.g.open(ctx, c, false)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	defer s.close()
	out, e := s.run(strings.NewReader(a.Message), 64<<10, commitArgv(a.All)...)
	if e != nil {
		return tool.Outcome{Err: e}
	}
	if out.Code != 0 {
		text := strings.ToLower(out.Stderr + "\n" + string(out.Stdout))
		switch {
		case strings.Contains(text, "nothing to commit") || strings.Contains(text, "nothing added to commit") || strings.Contains(text, "no changes added to commit"):
			hint := "stage changes first, or use all:true to commit every change to tracked files"
			if a.All {
				hint = "no tracked file has changed; new files must be staged (git add) before they can be committed"
			}
			return tool.Outcome{Data: res, Err: tool.Errorf(tool.CodeCommandFailed, hint, "nothing to commit")}
		case strings.Contains(text, "tell me who you are") || strings.Contains(text, "identity unknown") || strings.Contains(text, "unable to auto-detect email"):
			return tool.Outcome{Data: res, Err: tool.Errorf(tool.CodeCommandFailed,
				"set user.name and user.email in the repository's own config (git config user.name …); warden's git ignores the global config",
				"git commit failed: no author identity: %s", strings.TrimSpace(out.Stderr))}
		}
		return tool.Outcome{Data: res, Err: s.fail(out, "commit")}
	}
	res.Committed = true
	head, e := s.run(nil, 4096, "rev-parse", "--verify", "HEAD")
	if e != nil {
		return tool.Outcome{Err: e}
	}
	res.Commit = strings.TrimSpace(string(head.Stdout))
	if br, e := s.run(nil, 4096, "symbolic-ref", "--quiet", "--short", "HEAD"); e == nil && br.Code == 0 {
		res.Branch = strings.TrimSpace(string(br.Stdout))
	}
	files, e := s.run(nil, maxParse, "diff-tree", "-r", "--root", "--no-commit-id", "-M", "-z", "--raw", "--numstat", "--end-of-options", res.Commit)
	if e == nil && files.Code == 0 {
		res.Files, _, _ = parseRawNumstat(files.Stdout)
	}
	added, deleted := 0, 0
	for _, f := range res.Files {
		added += f.Added
		deleted += f.Deleted
	}
	res.Stat = fmt.Sprintf("%d file(s) changed, %d insertion(s)(+), %d deletion(s)(-)", len(res.Files), added, deleted)
	subject, _, _ := strings.Cut(strings.TrimSpace(a.Message), "\n")
	where := res.Branch
	if where == "" {
		where = "detached HEAD"
	}
	return tool.Outcome{
		Output: fmt.Sprintf("[%s %s] %s\n %s", where, short(res.Commit), subject, res.Stat),
		Data:   res,
	}
}
