package sandbox

import (
	"errors"
	"os"
	"sync/atomic"
)

// ExitLaunchFailed is the launcher's exit status when it could not set up
// the sandbox or start the program (as a shell reports 126 for a program
// it cannot run).
const ExitLaunchFailed = 126

// mainCalled records that this binary called Main: only such a binary
// can act as the launcher when it re-executes itself.
var mainCalled atomic.Bool

// Main makes this process the sandbox launcher when warden started it as
// one (its own binary re-executed with a hidden first argument): then it
// sets up the sandbox and executes the program, and never returns. In any
// other process it returns false at once.
//
// Call it first in main, and in the TestMain of every test package whose
// tests start programs (they are started through the test binary):
//
//	func main() {
//		if sandbox.Main() {
//			return
//		}
//		…
//	}
//
// Importing the package does nothing by itself; a binary that never
// calls Main cannot start sandboxed programs (Command says so instead of
// re-executing a binary that would not act as the launcher). Outside
// Linux there is no launcher: programs are started directly.
func Main() bool {
	mainCalled.Store(true)
	if len(os.Args) > 1 && (os.Args[1] == launcherArg || os.Args[1] == probeArg || os.Args[1] == poolArg || os.Args[1] == watchArg) {
		runLauncher()
	}
	return false
}

// errNoMain is Command's refusal in a binary that did not call Main.
var errNoMain = errors.New("sandbox: this binary does not call sandbox.Main first in main (or in TestMain), so it cannot act as the sandbox launcher")
