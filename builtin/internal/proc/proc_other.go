//go:build !linux

package proc

import "os/exec"

// waitExit reports when the started program has exited. Without waitid's
// WNOWAIT (Linux's) the program is reaped as it exits, so the kill of
// what is left of its process group that follows could, in principle,
// reach a group whose ID was reused meanwhile.
func waitExit(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	var err error
	go func() {
		err = cmd.Wait()
		close(ch)
	}()
	return ch, func() error { <-ch; return err }
}
