// Command wordcount is a warden wasm tool with the WASI command ABI: warden
// runs its _start with the tool's JSON arguments {"text": "..."} on stdin
// and takes stdout as the result: {"words":N,"lines":N,"bytes":N}. Bad
// arguments exit with status 2 and a message on stderr (warden reports a
// TOOL_ERROR with stderr's tail). A pure tool: no capabilities.
//
// Built without -buildmode (a command, not a reactor):
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -o wordcount.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}

// maxInput bounds what is read from stdin.
const maxInput = 16 << 20

type args struct {
	Text *string `json:"text"`
}

// Counts is the tool's output.
type Counts struct {
	Words int `json:"words"`
	Lines int `json:"lines"`
	Bytes int `json:"bytes"`
}

// run is the command: 0 on success, 2 for bad input, 1 if the output
// cannot be written.
func run(stdin io.Reader, stdout, stderr io.Writer) int {
	text, err := readArgs(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "wordcount:", err)
		return 2
	}
	b, err := json.Marshal(count(text))
	if err == nil {
		_, err = stdout.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintln(stderr, "wordcount:", err)
		return 1
	}
	return 0
}

func readArgs(stdin io.Reader) (string, error) {
	in, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err != nil {
		return "", fmt.Errorf("reading stdin: %w", err)
	}
	if len(in) > maxInput {
		return "", fmt.Errorf("input over %d bytes", maxInput)
	}
	var a args
	// Strict: unknown or case-variant fields and trailing data are refused.
	if err := warden.DecodeArgs(in, &a); err != nil {
		return "", err
	}
	if a.Text == nil {
		return "", errors.New(`invalid arguments: "text" is required`)
	}
	return *a.Text, nil
}

// count counts like wc: words are runs of non-space characters (Unicode
// white space separates them), bytes are UTF-8 bytes, and lines are
// newline-terminated lines plus a last line without a newline.
func count(text string) Counts {
	lines := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		lines++
	}
	return Counts{Words: len(strings.Fields(text)), Lines: lines, Bytes: len(text)}
}
