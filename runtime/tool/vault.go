package tool

import (
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strings"
	"sync"

	"github.com/wardenrt/warden/runtime/redact"
)

// Vault keeps the originals of the secrets the gate masked in the results
// of one run — an agent run, a workflow run, an MCP session — so that a
// mask written back into the file it came from is restored to the original
// bytes, while the model, the audit log and the store only ever see the
// mask. The owner of the run makes it (NewVault), passes it on every
// Request of the run, and drops it when the run ends: it lives in memory
// only, and nothing in it is ever written anywhere.
//
// Each distinct original gets one random id for the vault's lifetime, so a
// secret read twice (or shown again in a dry run's diff) has the same mask
// each time: [REDACTED:kind:id]. The id says nothing about the secret.
// Mask-shaped text that a result held as it was (a document about
// redaction) is kept as standing for itself.
//
// A Vault is safe for concurrent use.
type Vault struct {
	mu      sync.Mutex
	byID    map[string]*VaultEntry // id → entry
	byValue map[string]*VaultEntry // original → entry (secrets, not literal text)
	bytes   int
}

// VaultEntry is one original the vault keeps (see Vault.Lookup).
type VaultEntry struct {
	id, kind string
	original string
	// literal: mask-shaped text read as it was; it stands for itself.
	literal bool
	// files are the files the original was read from (absolute).
	files map[string]bool
}

// Limits of one vault: past them, a secret is masked with the id
// VaultUnkept, which the gate refuses on the way in, saying why.
const (
	vaultMaxEntries = 1 << 16
	vaultMaxBytes   = 64 << 20
	VaultUnkept     = "0000"
)

// NewVault returns an empty vault for one run. Its maps are made when it
// first keeps something: most calls' vaults never do.
func NewVault() *Vault {
	return &Vault{}
}

// maps makes the vault's maps if they are not made yet (v.mu held).
func (v *Vault) maps() {
	if v.byID == nil {
		v.byID, v.byValue = map[string]*VaultEntry{}, map[string]*VaultEntry{}
	}
}

// Len returns the number of masks the vault holds.
func (v *Vault) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.byID)
}

// newID returns an unused random id: 4 hexadecimal digits while they are
// easy to find, more as the vault fills. Never VaultUnkept.
func (v *Vault) newID() string {
	n := 2
	for try := 0; ; try++ {
		if try > 0 && try%8 == 0 && n < 8 {
			n += 2
		}
		b := make([]byte, n)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		id := hex.EncodeToString(b)
		if _, used := v.byID[id]; !used && id != VaultUnkept {
			return id
		}
	}
}

// mask returns the mask of original (of kind), read from file ("" when
// the output it was in is not one file's).
func (v *Vault) Mask(kind, original, file string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byValue[original]
	if !ok {
		if len(v.byID) >= vaultMaxEntries || v.bytes+len(original) > vaultMaxBytes {
			return redact.FormatMask(kind, VaultUnkept)
		}
		v.maps()
		e = &VaultEntry{id: v.newID(), kind: kind, original: original, files: map[string]bool{}}
		v.byID[e.id] = e
		v.byValue[original] = e
		v.bytes += len(original)
	}
	if file != "" {
		e.files[file] = true
	}
	return redact.FormatMask(e.kind, e.id)
}

// admit takes in the mask-shaped text a tool's raw output holds (read
// from file, or ""): text with an id the vault does not know is kept as
// standing for itself; the vault's own masks pass as they are; text whose
// id the vault gave to another secret is masked itself (kind mask-text),
// so that it can never be taken for that secret. It returns s with those
// replaced, and the masks that replaced them, in order: the text was
// altered, and the result's warning must say so.
func (v *Vault) Admit(s, file string) (string, []string) {
	refs := redact.FindMasks(s)
	if len(refs) == 0 {
		return s, nil
	}
	var wrote []string
	var b strings.Builder
	last := 0
	for _, m := range refs {
		text := s[m.Start:m.End]
		v.mu.Lock()
		e, known := v.byID[m.ID]
		switch {
		case !known && m.ID != VaultUnkept && len(v.byID) < vaultMaxEntries:
			v.maps()
			v.byID[m.ID] = &VaultEntry{id: m.ID, kind: m.Kind, original: text, literal: true}
			v.mu.Unlock()
			continue
		case known && (e.literal && e.original == text || !e.literal && e.kind == m.Kind):
			v.mu.Unlock()
			continue
		}
		v.mu.Unlock()
		mask := v.Mask("mask-text", text, file)
		b.WriteString(s[last:m.Start])
		b.WriteString(mask)
		wrote = append(wrote, mask)
		last = m.End
	}
	if last == 0 {
		return s, nil
	}
	b.WriteString(s[last:])
	return b.String(), wrote
}

// lookup returns the entry of a mask.
func (v *Vault) Lookup(m redact.MaskRef) (*VaultEntry, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byID[m.ID]
	if !ok || e.kind != m.Kind && !e.literal {
		return nil, false
	}
	if e.literal && e.original != m.Text() {
		return nil, false
	}
	return e, true
}

// filesOf returns the files an entry's original was read from, sorted.
func (v *Vault) FilesOf(e *VaultEntry) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(e.files))
	for f := range e.files {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// readFrom reports whether the entry's original was read from file.
func (v *Vault) ReadFrom(e *VaultEntry, file string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return e.files[file]
}

// Alias makes the masks of a recorded result stand for what the masks of
// the same result, produced again, stand for: a replay starts with an
// empty vault, and the recorded calls that wrote masks back name the
// masks of the recording. The masks are paired in order, and only when
// both texts hold the same number of masks of the same kinds; a recorded
// id the vault already uses for something else is left out. It returns
// the number of masks aliased.
func (v *Vault) Alias(recorded, now string) int {
	old, cur := redact.FindMasks(recorded), redact.FindMasks(now)
	if len(old) != len(cur) {
		return 0
	}
	for i := range old {
		if old[i].Kind != cur[i].Kind {
			return 0
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for i := range old {
		e, ok := v.byID[cur[i].ID]
		if !ok || e.literal {
			continue
		}
		if prev, used := v.byID[old[i].ID]; used {
			if prev == e {
				n++
			}
			continue
		}
		v.maps() // (made already: e is in it)
		v.byID[old[i].ID] = e
		n++
	}
	return n
}

// Original returns the entry's original text.
func (e *VaultEntry) Original() string { return e.original }

// Literal reports whether the entry is mask-shaped text a result held as
// it was: it stands for itself.
func (e *VaultEntry) Literal() bool { return e.literal }
