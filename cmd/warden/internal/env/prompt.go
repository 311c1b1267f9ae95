package env

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/wardenrt/warden/runtime/tool"
)

// Confirm asks on the terminal, or takes --yes.
func (e *Env) Confirm(question string, yes bool) error {
	if yes {
		return nil
	}
	tty := e.terminal()
	if tty == nil {
		return Fail(tool.CodeApprovalRequired, ExitDenied, "run it on a terminal, or pass --yes once you have read it", "this needs your answer and there is no terminal to ask")
	}
	fmt.Fprint(e.stderr, question+" [y/N]: ")
	line, _ := bufio.NewReader(tty).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return Fail(tool.CodeUserRejected, ExitDenied, "", "not done")
	}
	return nil
}
