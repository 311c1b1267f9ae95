package main

import (
	"reflect"
	"testing"
)

func TestCompute(t *testing.T) {
	s := compute("The cat sat. The cat ran!  Did it? yes\n", 2)
	want := Stats{
		Characters: 39, Letters: 26, Words: 9, Sentences: 4, Lines: 1,
		TopWords: []WordFreq{{"cat", 2}, {"the", 2}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if e := compute("", 10); e.Words != 0 || e.Sentences != 0 || e.Lines != 0 || e.TopWords == nil {
		t.Fatalf("empty: %+v", e)
	}
	if u := compute("Ünïcödé wörds... «quoted» wörds", 1); u.Characters != 31 || u.Words != 4 || u.Sentences != 2 || u.TopWords[0] != (WordFreq{"wörds", 2}) {
		t.Fatalf("unicode: %+v", u)
	}
}
