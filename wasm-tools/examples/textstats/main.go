// Command textstats is a pure warden wasm tool (Extism plugin, export
// "call"): word, sentence and character counts and the most frequent words
// of a text. It needs no capabilities.
package main

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {}

type args struct {
	Text string `json:"text"`
	Top  *int   `json:"top"`
}

// Stats is the tool's output.
type Stats struct {
	Characters int        `json:"characters"`
	Letters    int        `json:"letters"`
	Words      int        `json:"words"`
	Sentences  int        `json:"sentences"`
	Lines      int        `json:"lines"`
	TopWords   []WordFreq `json:"top_words"`
}

// WordFreq is one entry of Stats.TopWords.
type WordFreq struct {
	Word  string `json:"word"`
	Count int    `json:"count"`
}

//go:wasmexport call
func call() int32 {
	var a args
	if err := warden.Args(&a); err != nil {
		return warden.Fail(err)
	}
	top := 10
	if a.Top != nil {
		top = min(max(*a.Top, 0), 100)
	}
	return warden.Return(compute(a.Text, top))
}

func compute(text string, top int) Stats {
	s := Stats{Characters: utf8.RuneCountInString(text), TopWords: []WordFreq{}}
	if text != "" {
		s.Lines = strings.Count(text, "\n") + 1
		if strings.HasSuffix(text, "\n") {
			s.Lines--
		}
	}
	freq := map[string]int{}
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '-'
	})
	for _, w := range words {
		w = strings.ToLower(strings.Trim(w, "'-"))
		if w == "" {
			continue
		}
		s.Words++
		freq[w]++
	}
	for _, r := range text {
		if unicode.IsLetter(r) {
			s.Letters++
		}
	}
	// A sentence ends at a run of . ! ? (or at the end of text that has
	// words after the last terminator).
	inEnd, pending := false, false
	for _, r := range text {
		switch {
		case r == '.' || r == '!' || r == '?':
			if pending && !inEnd {
				s.Sentences++
			}
			inEnd, pending = true, false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			inEnd, pending = false, true
		}
	}
	if pending {
		s.Sentences++
	}
	for w, n := range freq {
		s.TopWords = append(s.TopWords, WordFreq{w, n})
	}
	sort.Slice(s.TopWords, func(i, j int) bool {
		if s.TopWords[i].Count != s.TopWords[j].Count {
			return s.TopWords[i].Count > s.TopWords[j].Count
		}
		return s.TopWords[i].Word < s.TopWords[j].Word
	})
	if len(s.TopWords) > top {
		s.TopWords = s.TopWords[:top]
	}
	return s
}
