// Command warden is a WebAssembly-extensible agent runtime whose every tool
// call goes through one gate: policy, capabilities, approval and a
// tamper-evident audit log.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}
