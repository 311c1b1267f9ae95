package ui

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/wardenrt/warden/runtime/gate"
)

// TerminalApprover asks the person at the terminal. It shows the tool, the
// redacted arguments, what the call needs and, for dry_run_first rules, the
// preview; the answer approves this call once, the calls of the tool the
// same rule asks about for the rest of this run (this process) or for an
// hour (remembered in the store, for this workspace), or refuses it.
type TerminalApprover struct {
	In  io.Reader
	Out io.Writer

	mu     sync.Mutex
	r      *bufio.Reader
	always map[string]bool // tool + rule approved for the rest of the run
}

// rememberFor is how long "allow for 1 hour" lasts.
const rememberFor = time.Hour

func (a *TerminalApprover) Approve(ctx context.Context, r gate.ApprovalRequest) (gate.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := r.Tool + "\x00" + r.Rule
	if r.Lasting && a.always[key] {
		fmt.Fprintf(a.Out, "warden: %s approved for the rest of this run\n", Printable(r.Tool))
		return gate.Approval{Approved: true, By: "user (rest of run)"}, nil
	}
	if a.r == nil {
		a.r = bufio.NewReader(a.In)
	}
	fmt.Fprintf(a.Out, "\nwarden: %s wants to call %s\n", Printable(strings.Join(r.Principal, " → ")), Printable(r.Tool))
	fmt.Fprintf(a.Out, "  arguments: %s\n", Printable(string(r.Args)))
	if len(r.Needs) > 0 {
		fmt.Fprintf(a.Out, "  needs:     %s\n", Printable(strings.Join(r.Needs, ", ")))
	}
	fmt.Fprintf(a.Out, "  rule:      %s\n", Printable(r.Rule))
	if r.Matched != "" {
		fmt.Fprintf(a.Out, "  matched:   %s\n", Printable(r.Matched))
	}
	if r.Preview != nil {
		fmt.Fprintf(a.Out, "  preview:\n%s\n", Indent(r.Preview.Output, "    "))
	}
	switch {
	case r.CanRemember:
		fmt.Fprint(a.Out, "Approve? [y]es once, [a]lways for the rest of this run, [h] for 1 hour (what this rule asks about, in this workspace), [N]o: ")
	case r.Lasting:
		fmt.Fprint(a.Out, "Approve? [y]es once, [a]lways for the rest of this run, [N]o: ")
	default:
		fmt.Fprint(a.Out, "Approve? [y]es, once (its words are only known when it runs, or an untrusted policy asks), [N]o: ")
	}
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	br := a.r
	go func() {
		line, err := br.ReadString('\n')
		ch <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(a.Out)
		return gate.Approval{}, gate.ErrCancelled
	case ans := <-ch:
		if ans.err != nil && ans.line == "" {
			fmt.Fprintln(a.Out)
			return gate.Approval{}, gate.ErrCancelled
		}
		switch strings.ToLower(strings.TrimSpace(ans.line)) {
		case "y", "yes":
			return gate.Approval{Approved: true, By: "user"}, nil
		case "a", "always":
			if !r.Lasting {
				break
			}
			if a.always == nil {
				a.always = map[string]bool{}
			}
			a.always[key] = true
			return gate.Approval{Approved: true, By: "user (rest of run)"}, nil
		case "h", "hour":
			if r.CanRemember {
				return gate.Approval{Approved: true, By: "user", For: rememberFor}, nil
			}
		}
		return gate.Approval{Approved: false, By: "user"}, nil
	}
}

// Indent makes s printable and puts prefix before each of its lines.
func Indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(Printable(s), "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
