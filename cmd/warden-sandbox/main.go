// Command warden-sandbox is warden's sandbox launcher on its own: warden
// starts every sandboxed program through it when it is installed beside
// warden's binary from the same build (go install …/cmd/...), and through
// its own binary re-executed otherwise. Started by hand it does nothing.
package main

import (
	"fmt"
	"os"

	"github.com/wardenrt/warden/runtime/sandbox"
)

func main() {
	if sandbox.Main() {
		return
	}
	fmt.Fprintln(os.Stderr, "warden-sandbox: warden's sandbox launcher; warden starts it, with the sandbox to apply, for each program it runs")
	os.Exit(2)
}
