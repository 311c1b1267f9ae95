//go:build !linux

package sandbox

import (
	"os"
	"runtime"
)

// detect: Landlock, seccomp and the namespaces are Linux's; elsewhere
// there is nothing to confine a program with, and the level is off.
func detect() Support {
	s := Support{
		Why:           "Landlock is a Linux facility and this is " + runtime.GOOS + ": programs run unconfined",
		NamespacesWhy: "network and mount namespaces are Linux's and this is " + runtime.GOOS,
	}
	return s
}

// command is how Command starts the program outside Linux: directly (see
// directCommand).
func command(path string, args []string, spec Spec, level string) (*Launch, error) {
	return directCommand(path, args, spec, level), nil
}

// Listeners returns nothing outside Linux: programs get no network
// namespace, so there are no listeners inside one.
func (l *Launch) Listeners() ([]*os.File, error) { return nil, nil }

// runLauncher: outside Linux warden never starts itself as the launcher.
func runLauncher() {
	os.Stderr.WriteString("warden sandbox: there is no launcher on " + runtime.GOOS + "\n")
	os.Exit(ExitLaunchFailed)
}
