// Command wasiprobecmd is the WASI-command (_start) form of wasiprobe: it
// reads its arguments JSON from stdin, runs the same probes, and prints
// {"stdin": <what it read>, "report": <probe.Report>} on stdout, exiting 0.
// Its stdout therefore also holds the stdout marker line first; the JSON is
// the last line.
package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/wardenrt/warden/wasm-tools/hostile/internal/probe"
)

func main() {
	in, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	stdin := string(in)
	if err != nil {
		stdin = "error: " + err.Error()
	}
	r := probe.Run()
	out, err := json.Marshal(map[string]any{"stdin": stdin, "report": r})
	if err != nil {
		os.Exit(1)
	}
	os.Stdout.Write(append(out, '\n'))
}
