package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/wardenrt/warden/runtime/decode"
)

// Which policy is in force, and whether its owner trusts it.
//
// An explicit policy (--policy FILE, WARDEN_POLICY) is the owner's choice
// and in force as written; so is the home policy (<home>/policy.yaml), in
// the owner's own state directory. A workspace policy
// (<workspace>/.warden/policy.yaml) comes with the workspace — a cloned
// repository's author wrote it — and is in force as written only while its
// owner trusts it: `warden policy trust` recorded its path and sha256, and
// the file still has that sha256. Otherwise it only narrows the home policy
// (else the built-in default); see Narrow.

// TrustState says where the policy in force came from.
type TrustState string

// Trust states.
const (
	TrustExplicit  TrustState = "explicit"  // --policy FILE or WARDEN_POLICY
	TrustTrusted   TrustState = "trusted"   // a workspace policy its owner trusted, unchanged since
	TrustUntrusted TrustState = "untrusted" // a workspace policy never trusted: it only narrows
	TrustChanged   TrustState = "changed"   // changed since trusted: it only narrows, and so does what was trusted
	TrustMissing   TrustState = "missing"   // a trusted workspace policy whose file is gone: what it said still narrows
	TrustHome      TrustState = "home"      // <home>/policy.yaml
	TrustBuiltIn   TrustState = "built-in"  // the built-in default
)

// TrustRecord is what `warden policy trust` records of a policy file.
type TrustRecord struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Content is the trusted text, to show what changed when it is
	// trusted again.
	Content   string    `json:"content"`
	TrustedAt time.Time `json:"trusted_at"`
	By        string    `json:"by"`
}

// TrustStore holds the trust records. The store satisfies it.
type TrustStore interface {
	// TrustRecord returns the record of path; ok is false when there is
	// none.
	TrustRecord(ctx context.Context, path string) (r TrustRecord, ok bool, err error)
}

// PolicyFiles are where policies are looked for.
type PolicyFiles struct {
	Explicit  string // --policy / WARDEN_POLICY ("" when not given)
	Workspace string // <workspace>/.warden/policy.yaml
	Home      string // <home>/policy.yaml
}

// PolicyInForce is the policy that applies and how it was chosen.
type PolicyInForce struct {
	Policy *Policy
	State  TrustState
	// File is the file the state is about (the workspace policy when one
	// was found; else the file in force; "" for the built-in default), and
	// SHA256 its digest.
	File, SHA256 string
	// Ignored lists what an untrusted workspace policy asked for that would
	// have widened the policy, and was left out.
	Ignored []Ignored
	// Base is, for an untrusted workspace policy, the policy it narrows.
	Base *Policy
}

// ResolvePolicy finds the policy in force: the explicit file, else the
// workspace's (as written when trusted, else narrowing the next one), else
// the home policy, else the built-in default. trust may be nil only when
// no workspace policy can exist.
func ResolvePolicy(ctx context.Context, files PolicyFiles, trust TrustStore) (*PolicyInForce, error) {
	if files.Explicit != "" {
		p, sum, err := loadPolicyFile(files.Explicit)
		if err != nil {
			return nil, err
		}
		return &PolicyInForce{Policy: p, State: TrustExplicit, File: files.Explicit, SHA256: sum}, nil
	}
	var base *PolicyInForce
	if files.Home != "" {
		if p, sum, err := loadPolicyFile(files.Home); err == nil {
			base = &PolicyInForce{Policy: p, State: TrustHome, File: files.Home, SHA256: sum}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if base == nil {
		// Parsed only when no home policy replaces it.
		base = &PolicyInForce{Policy: DefaultPolicy(), State: TrustBuiltIn}
	}
	if files.Workspace == "" {
		return base, nil
	}
	if trust == nil {
		return nil, errors.New("policy: trust records cannot be read")
	}
	file := CanonicalPolicyPath(files.Workspace)
	rec, trusted, err := trust.TrustRecord(ctx, file)
	if err != nil {
		return nil, err
	}
	// A trusted file that changes or goes is untrusted again at once, but
	// what the owner trusted keeps narrowing: a restriction it made is not
	// lifted by deleting or editing the file.
	if trusted {
		tp, err := ParsePolicy(file+" (as trusted "+rec.TrustedAt.UTC().Format(time.RFC3339)+")", []byte(rec.Content))
		if err == nil {
			nb, _ := Narrow(base.Policy, tp)
			base = &PolicyInForce{Policy: nb, State: base.State, File: base.File, SHA256: base.SHA256}
		}
	}
	data, err := ReadPolicyFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		if trusted {
			base.State, base.File, base.Base = TrustMissing, file, base.Policy
		}
		return base, nil
	}
	if err != nil {
		return nil, err
	}
	// A policy that does not parse is an error whether trusted or not: an
	// untrusted one must be parsed to narrow.
	wp, err := ParsePolicy(file, data)
	if err != nil {
		return nil, err
	}
	sum := SHA256Hex(data)
	if trusted && rec.SHA256 == sum {
		return &PolicyInForce{Policy: wp, State: TrustTrusted, File: file, SHA256: sum}, nil
	}
	state := TrustUntrusted
	if trusted {
		state = TrustChanged
	}
	p, ign := Narrow(base.Policy, wp)
	return &PolicyInForce{Policy: p, State: state, File: file, SHA256: sum, Ignored: ign, Base: base.Policy}, nil
}

// CanonicalPolicyPath is the path trust records name a policy file by:
// absolute, its directory's symlinks resolved (the file itself may be a
// link; what it holds is what its digest covers).
func CanonicalPolicyPath(file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		return file
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// ReadPolicyFile reads a policy file: a regular file (never a device or a
// FIFO), at most MaxPolicyBytes, its size checked before it is read.
func ReadPolicyFile(file string) ([]byte, error) {
	data, err := decode.ReadFile(file, MaxPolicyBytes)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return data, nil
}

// loadPolicyFile reads and parses a policy file and returns its digest.
func loadPolicyFile(file string) (*Policy, string, error) {
	data, err := ReadPolicyFile(file)
	if err != nil {
		return nil, "", err
	}
	p, err := ParsePolicy(file, data)
	if err != nil {
		return nil, "", err
	}
	return p, SHA256Hex(data), nil
}

// SHA256Hex is the hex SHA-256 of data.
func SHA256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
