package storetest

import (
	"math/rand/v2"
	"strings"

	"github.com/wardenrt/warden/store"
)

// Corpus generates realistic memory text for benchmarks: a vocabulary of
// synthetic words whose frequencies follow Zipf's law, entries of 20 to 60
// words.
type Corpus struct {
	Vocab []string
	zipf  *rand.Zipf
	rng   *rand.Rand
}

// NewCorpus returns a corpus of words distinct words, from randSeed.
func NewCorpus(randSeed uint64, words int) *Corpus {
	rng := rand.New(rand.NewPCG(randSeed, randSeed^0x9e3779b97f4a7c15))
	consonants := []string{"b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "ch"}
	vowels := []string{"a", "e", "i", "o", "u", "ai", "ou"}
	seen := make(map[string]bool)
	var vocab []string
	for len(vocab) < words {
		var sb strings.Builder
		for range 2 + rng.IntN(3) {
			sb.WriteString(consonants[rng.IntN(len(consonants))])
			sb.WriteString(vowels[rng.IntN(len(vowels))])
		}
		w := sb.String()
		if !seen[w] && len(store.QueryTerms(w)) == 1 {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	return &Corpus{Vocab: vocab, zipf: rand.NewZipf(rng, 1.07, 2, uint64(words-1)), rng: rng}
}

// Word draws a word as the text does.
func (c *Corpus) Word() string { return c.Vocab[c.zipf.Uint64()] }

// Text draws an entry.
func (c *Corpus) Text() string {
	n := 20 + c.rng.IntN(41)
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(c.Word())
	}
	sb.WriteByte('.')
	return sb.String()
}
