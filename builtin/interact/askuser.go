// Package interact is the interact family: ask_user, a question to the
// person at the terminal.
package interact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/wardenrt/warden/builtin/internal/textutil"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// AskUser is the `ask_user` tool: it asks the
// person at the terminal a question and returns the answer.
//
// How it reads. The terminal is put in raw mode for the question and always
// restored, and the line is read with golang.org/x/term's line editor
// (term.Terminal: editing keys, no echo for password). Raw mode rather than
// term.ReadPassword because ReadPassword keeps the terminal's signal keys: a
// Ctrl-C would kill warden (or, with no controlling terminal, vanish) instead
// of ending the question with USER_CANCELLED. In raw mode Ctrl-C and Ctrl-D
// arrive as bytes, and term.Terminal ends the line with io.EOF for both.
//
// Cancellation. A read(2) blocked on a terminal cannot be interrupted, and a
// goroutine left blocked in it would steal the next keystroke typed for
// someone else. So nothing blocks in read: the reader poll(2)s the terminal
// together with a private wake-up pipe and reads only when a byte is ready;
// when the call's context ends, the pipe is written, poll returns, the
// terminal is restored and the call returns (USER_CANCELLED, or TIMEOUT for
// a deadline). This works for every terminal file, blocking or not, and
// changes no file-status flag that other readers of the same terminal share.
//
// Who is asking. The question comes from a model, a workflow or a guest, so
// it is shown with the caller's principal, and its control and formatting
// characters are shown escaped (\x1b…): a prompt cannot clear the screen,
// move the cursor or forge warden's own approval prompt.
//
// Passwords. With password: true nothing typed is echoed, the value is never
// put in the Output text, and data carries sensitive: true and a random
// digest_salt: the audit record keeps no result data, only a sha256 of the
// output and data, and the salt makes that digest useless for guessing a
// short password offline. The value itself is returned in data.value (that
// is the point of the call); see the report for what the gate should add.
type AskUser struct {
	Config

	once sync.Once
	turn chan struct{} // one question on the terminal at a time
}

// Config configures the ask_user tool.
type Config struct {
	// TTY is the terminal answers are read from (cmd passes its stdin when
	// that is a terminal); nil, or a file that is not a terminal, means there
	// is no one to ask and every call ends with USER_CANCELLED at once.
	TTY *os.File
	// Out receives the question and the echo of what is typed; nil means TTY
	// itself. It should be the same terminal (cmd may pass stderr when
	// stderr is that terminal).
	Out io.Writer
	// MaxAttempts is how many answers failing validation are allowed before
	// INVALID_INPUT; 0 means 3.
	MaxAttempts int
}

var (
	_ tool.Typed[askArgs]          = (*AskUser)(nil)
	_ tool.TypedPreviewer[askArgs] = (*AskUser)(nil)
)

// askDefaultAttempts is the default number of attempts.
const askDefaultAttempts = 3

// Tools returns the interact family: ask_user, with cfg.
func Tools(cfg Config) []tool.Tool { return []tool.Tool{tool.Adapt[askArgs](&AskUser{Config: cfg})} }

// Spec implements tool.Typed. ask_user is not ReadOnly: a dry run must
// not block on a person, so it previews the question instead of asking it.
func (a *AskUser) Spec() tool.Spec {
	return tool.Spec{
		Name: "ask_user",
		Description: "Ask the person at the terminal a question and return the answer (data.value). Supports a default, validation " +
			"(pattern, min_length, max_length, allowed_values; the user is asked again up to 3 times) and hidden input for passwords. " +
			"Fails with USER_CANCELLED when there is no terminal or the user presses Ctrl-C / Ctrl-D. Needs the user.ask grant.",
		Capabilities: []capability.Kind{capability.UserAsk},
	}
}

// askValidation is ask_user's validation argument.
type askValidation struct {
	Pattern       *string  `json:"pattern,omitempty" maxLength:"1024" jsonschema:"RE2 regular expression the answer must match (unanchored: use ^ and $ to match the whole answer)."`
	MinLength     *int     `json:"min_length,omitempty" minimum:"0" maximum:"65536" jsonschema:"Minimum length in characters."`
	MaxLength     *int     `json:"max_length,omitempty" minimum:"1" maximum:"65536" jsonschema:"Maximum length in characters."`
	AllowedValues []string `json:"allowed_values,omitempty" maxItems:"100" items.maxLength:"1024" jsonschema:"The answer must be exactly one of these."`
}

// askArgs are ask_user's arguments; their schema is its input schema.
type askArgs struct {
	Prompt     string         `json:"prompt" minLength:"1" maxLength:"4000" jsonschema:"The question shown to the user."`
	Default    *string        `json:"default,omitempty" maxLength:"4096" jsonschema:"Value used when the user just presses Enter."`
	Validation *askValidation `json:"validation,omitempty" jsonschema:"Rules the answer must satisfy; the user is asked again (3 attempts) until it does."`
	Password   bool           `json:"password,omitempty" jsonschema:"Hide the input (no echo); the value is returned in data.value only."`
}

// askQuestion is a validated question.
type askQuestion struct {
	askArgs
	re *regexp.Regexp
}

func (a *AskUser) parse(args *askArgs) (askQuestion, *tool.Error) {
	q := askQuestion{askArgs: *args}
	if strings.TrimSpace(q.Prompt) == "" {
		return q, tool.Errorf(tool.CodeInvalidInput, "say what you are asking", "prompt is empty")
	}
	if v := q.Validation; v != nil {
		if v.Pattern != nil {
			re, err := regexp.Compile(*v.Pattern)
			if err != nil {
				return q, tool.Errorf(tool.CodeInvalidInput, "write pattern in RE2 syntax (https://golang.org/s/re2syntax)",
					"validation.pattern does not compile: %v", err)
			}
			q.re = re
		}
		if v.MinLength != nil && v.MaxLength != nil && *v.MinLength > *v.MaxLength {
			return q, tool.Errorf(tool.CodeInvalidInput, "make min_length at most max_length",
				"validation.min_length %d is greater than max_length %d", *v.MinLength, *v.MaxLength)
		}
	}
	return q, nil
}

// check returns why value fails the validation, or "".
func (q askQuestion) check(value string) string {
	v := q.Validation
	if v == nil {
		return ""
	}
	n := utf8.RuneCountInString(value)
	if v.MinLength != nil && n < *v.MinLength {
		return fmt.Sprintf("must be at least %d characters", *v.MinLength)
	}
	if v.MaxLength != nil && n > *v.MaxLength {
		return fmt.Sprintf("must be at most %d characters", *v.MaxLength)
	}
	if len(v.AllowedValues) > 0 {
		ok := false
		for _, av := range v.AllowedValues {
			ok = ok || av == value
		}
		if !ok {
			return "must be one of: " + textutil.Show(strings.Join(v.AllowedValues, ", "), false)
		}
	}
	if q.re != nil && !q.re.MatchString(value) {
		return "must match the pattern " + textutil.Show(q.re.String(), false)
	}
	return ""
}

// rules describes the validation for the person asked.
func (q askQuestion) rules() string {
	var parts []string
	if q.Default != nil {
		if q.Password {
			parts = append(parts, "Enter keeps the default")
		} else {
			parts = append(parts, "default: "+textutil.Show(*q.Default, false))
		}
	}
	if v := q.Validation; v != nil {
		if len(v.AllowedValues) > 0 {
			parts = append(parts, "one of: "+textutil.Show(strings.Join(v.AllowedValues, ", "), false))
		}
		switch {
		case v.MinLength != nil && v.MaxLength != nil:
			parts = append(parts, fmt.Sprintf("%d-%d characters", *v.MinLength, *v.MaxLength))
		case v.MinLength != nil:
			parts = append(parts, fmt.Sprintf("at least %d characters", *v.MinLength))
		case v.MaxLength != nil:
			parts = append(parts, fmt.Sprintf("at most %d characters", *v.MaxLength))
		}
		if q.re != nil {
			parts = append(parts, "pattern "+textutil.Show(q.re.String(), false))
		}
	}
	if q.Password {
		parts = append(parts, "input hidden")
	}
	return strings.Join(parts, "; ")
}

// Needs implements tool.Typed: asking a person needs user.ask.
func (a *AskUser) Needs(_ *tool.Call, args *askArgs) ([]capability.Need, error) {
	if _, err := a.parse(args); err != nil {
		return nil, err
	}
	return []capability.Need{{Kind: capability.UserAsk}}, nil
}

// Preview implements tool.TypedPreviewer: it shows the question it would
// ask and asks nothing.
func (a *AskUser) Preview(_ context.Context, _ *tool.Call, args *askArgs) tool.Outcome {
	q, err := a.parse(args)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	out := "would ask the user on the terminal: " + textutil.Show(q.Prompt, false)
	if r := q.rules(); r != "" {
		out += " (" + r + ")"
	}
	var warnings []string
	if _, ok := a.terminal(); !ok {
		warnings = append(warnings, "there is no terminal: the call would end with USER_CANCELLED")
	}
	return tool.Outcome{Output: out, Data: map[string]any{"prompt": q.Prompt, "hidden_input": q.Password, "terminal": len(warnings) == 0}, Warnings: warnings}
}

// AskUserResult is ask_user's data.
type AskUserResult struct {
	// Value is the answer (the default when the user pressed Enter).
	Value string `json:"value"`
	// Validated is true when validation rules were given and the value
	// satisfies them; false when there were none to check.
	Validated bool `json:"validated"`
	// DefaultUsed is true when the user pressed Enter on an empty line and
	// the default was taken.
	DefaultUsed bool `json:"default_used"`
	// Attempts is the number of answers read.
	Attempts int `json:"attempts"`
	// Sensitive marks a password answer: keep it out of logs, transcripts
	// and anything stored.
	Sensitive bool `json:"sensitive,omitempty"`
	// DigestSalt (password answers) is random, so the audit log's sha256 of
	// the result cannot be used to guess the password.
	DigestSalt string `json:"digest_salt,omitempty"`
}

// terminal returns the terminal's descriptor, and whether there is one.
func (a *AskUser) terminal() (int, bool) {
	if a.TTY == nil {
		return -1, false
	}
	rc, err := a.TTY.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd := -1
	if rc.Control(func(u uintptr) { fd = int(u) }) != nil || fd < 0 {
		return -1, false
	}
	return fd, term.IsTerminal(fd)
}

func (a *AskUser) acquire(ctx context.Context) error {
	a.once.Do(func() { a.turn = make(chan struct{}, 1) })
	select {
	case a.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *AskUser) release() { <-a.turn }

const askNoTerminalHint = "run warden on a terminal to answer questions, or give the value in the task or the workflow's parameters"

// Run implements tool.Typed.
func (a *AskUser) Run(ctx context.Context, c *tool.Call, args *askArgs) tool.Outcome {
	q, perr := a.parse(args)
	if perr != nil {
		return tool.Outcome{Err: perr}
	}
	fd, ok := a.terminal()
	if !ok {
		return tool.Fail(tool.CodeUserCancelled, askNoTerminalHint, "there is no terminal to ask the user on")
	}
	if err := a.acquire(ctx); err != nil {
		return askCtxFailure(err)
	}
	defer a.release()

	old, err := term.MakeRaw(fd)
	if err != nil {
		return tool.Fail(tool.CodeUserCancelled, askNoTerminalHint, "cannot use the terminal: %v", err)
	}
	defer term.Restore(fd, old)

	rd, err := newAskReader(ctx, fd)
	if err != nil {
		return tool.Fail(tool.CodeInternal, "", "ask_user: %v", err)
	}
	defer rd.close()
	var out io.Writer = a.TTY
	if a.Out != nil {
		out = a.Out
	}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{rd, out}, "")
	if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
		t.SetSize(w, h)
	}

	who := "warden"
	if len(c.Principal) > 0 {
		who = "warden: " + textutil.Show(strings.Join(c.Principal, " → "), false)
	}
	header := fmt.Sprintf("\n[%s asks]\n%s\n", who, askIndent(textutil.Show(q.Prompt, true)))
	if r := q.rules(); r != "" {
		header += "  (" + r + ")\n"
	}
	t.Write([]byte(header))

	attempts := a.MaxAttempts
	if attempts <= 0 {
		attempts = askDefaultAttempts
	}
	prompt := "> "
	if q.Password {
		prompt = "(hidden) > "
	}
	var reason string
	for n := 1; n <= attempts; n++ {
		var line string
		if q.Password {
			line, err = t.ReadPassword(prompt)
		} else {
			t.SetPrompt(prompt)
			line, err = t.ReadLine()
		}
		if errors.Is(err, term.ErrPasteIndicator) {
			err = nil
		}
		if err != nil {
			t.Write([]byte("\n"))
			switch {
			case ctx.Err() != nil:
				return askCtxFailure(ctx.Err())
			case errors.Is(err, io.EOF):
				return tool.Fail(tool.CodeUserCancelled, "ask again if the answer is still needed", "the user cancelled the question (Ctrl-C or Ctrl-D)")
			}
			return tool.Fail(tool.CodeUserCancelled, askNoTerminalHint, "the terminal went away: %v", err)
		}
		res := AskUserResult{Value: line, Attempts: n, Validated: q.Validation != nil}
		if line == "" && q.Default != nil {
			res.Value, res.DefaultUsed = *q.Default, true
		}
		if reason = q.check(res.Value); reason == "" {
			return askOutcome(q, res)
		}
		left := attempts - n
		msg := fmt.Sprintf("  ✗ the answer %s", reason)
		if left > 0 {
			msg += fmt.Sprintf(" (%d attempt(s) left)", left)
		}
		t.Write([]byte(msg + "\n"))
	}
	return tool.Fail(tool.CodeInvalidInput, "ask again with clearer instructions, or loosen the validation",
		"no valid answer after %d attempts: the last one %s", attempts, reason)
}

func askOutcome(q askQuestion, res AskUserResult) tool.Outcome {
	if q.Password {
		res.Sensitive = true
		var salt [16]byte
		rand.Read(salt[:])
		res.DigestSalt = hex.EncodeToString(salt[:])
		out := "the user entered a hidden value; it is in data.value and is not shown here"
		if res.DefaultUsed {
			out = "the user kept the default (hidden) value; it is in data.value"
		}
		return tool.Outcome{Output: out, Data: res}
	}
	out := "the user answered: " + res.Value
	if res.DefaultUsed {
		out = "the user kept the default: " + res.Value
	}
	return tool.Outcome{Output: out, Data: res}
}

func askCtxFailure(err error) tool.Outcome {
	if errors.Is(err, context.DeadlineExceeded) {
		return tool.Fail(tool.CodeTimeout, "allow more time for the answer", "the user did not answer in time")
	}
	return tool.Fail(tool.CodeUserCancelled, "ask again if the answer is still needed", "the question was cancelled before the user answered")
}

func askIndent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}
