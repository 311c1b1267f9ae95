//go:build wasip1

// Command count_vowels reproduces the best-known published Extism plugin:
// one export named after what it does (count_vowels, not call), raw text as
// its input — no JSON, no schema, no sidecar — and a JSON result. Like the
// published one it keeps a running total in an Extism var and takes the
// vowels from config (default aeiouAEIOU).
package main

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/extism/go-pdk"
)

func main() {}

//go:wasmexport count_vowels
func countVowels() int32 {
	input := pdk.InputString()
	vowels, ok := pdk.GetConfig("vowels")
	if !ok {
		vowels = "aeiouAEIOU"
	}
	count := 0
	for _, r := range input {
		if strings.ContainsRune(vowels, r) {
			count++
		}
	}
	total := count
	if v := pdk.GetVar("total"); v != nil {
		if n, err := strconv.Atoi(string(v)); err == nil {
			total += n
		}
	}
	pdk.SetVar("total", []byte(strconv.Itoa(total)))
	b, _ := json.Marshal(map[string]any{"count": count, "total": total, "vowels": vowels})
	pdk.Output(b)
	return 0
}
