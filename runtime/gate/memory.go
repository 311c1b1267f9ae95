package gate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrNotFound is returned by the interfaces runtime declares (Memory, …)
// when the named thing does not exist.
var ErrNotFound = errors.New("not found")

// MemoryEntry is one namespaced memory entry.
type MemoryEntry struct {
	Namespace string    `json:"namespace"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
}

// MemoryHit is a search result.
type MemoryHit struct {
	MemoryEntry
	Score float64 `json:"score"`
}

// Memory is the memory the memory tools use. cmd/warden adapts the store to
// it; values reach it already redacted.
type Memory interface {
	PutMemory(ctx context.Context, ns, key, value string) error
	// GetMemory returns an error wrapping ErrNotFound when the entry is absent.
	GetMemory(ctx context.Context, ns, key string) (MemoryEntry, error)
	// DeleteMemory returns an error wrapping ErrNotFound when the entry is absent.
	DeleteMemory(ctx context.Context, ns, key string) error
	// ListMemory lists entries of one namespace ("" = all), at most limit (0 = all).
	ListMemory(ctx context.Context, ns string, limit int) ([]MemoryEntry, error)
	// SearchMemory ranks entries of the namespaces ns accepts (nil = all) by
	// relevance to text (BM25), best first, at most limit (0 = 10).
	SearchMemory(ctx context.Context, text string, ns func(string) bool, limit int) ([]MemoryHit, error)
}

// Run statuses, shared by agent and workflow runs (`runs ls` lists both).
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	// RunStopped: a budget (steps, tokens, time) ended the run.
	RunStopped = "stopped"
)

// Runs keeps run records (agent and workflow runs) as JSON documents
// under their id; the store satisfies it.
type Runs interface {
	PutRun(ctx context.Context, id string, doc json.RawMessage) error
}

// Artifacts keeps content-addressed blobs (old versions of modified files,
// whole tool outputs). The store satisfies it.
type Artifacts interface {
	// PutArtifact stores data and returns its digest ("sha256:<hex>").
	PutArtifact(ctx context.Context, data []byte) (string, error)
}

// ContextNamespace is the memory namespace of a run's primed context:
// prime_context writes it, clear_context empties it, and the agent loop
// puts it in the run's prompt. "" is the CLI's own (a `warden call`
// outside any run). Run ids are warden's, not the model's, but are still
// reduced to a safe alphabet and length.
func ContextNamespace(runID string) string {
	if runID == "" {
		runID = "cli"
	}
	var b strings.Builder
	for _, r := range runID {
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".-_:", r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 128 {
			break
		}
	}
	return "_context/" + b.String()
}
