package env

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/wasmtool"
	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
)

// A fleet shares one PostgreSQL store. What each host would otherwise keep
// for itself is published there and written into every host's home:
//
//   - the owner's policy: `warden policy publish` stores <home>/policy.yaml
//     for the fleet; each host writes it into its home before it resolves
//     the policy;
//   - approved wasm modules: approving one (its pin is shared already)
//     publishes its bytes and sidecar as artifacts; each host writes the
//     modules it lacks into <home>/tools, where they load as anywhere
//     else: only while they hash to their pins.
//
// A host never overwrites a file someone put or edited there: it replaces
// only files it wrote from the store (their hashes are kept in
// <home>/fleet-synced.json) or that were published from it. The daemon and
// `mcp serve` LISTEN for changes and sync and reload at once.

// PublishedPolicy is the name a policy is published under, and the file in
// the home each host writes it to.
const PublishedPolicy = "policy.yaml"

// PGStore returns the store when it is a PostgreSQL one (opening it), nil
// for bbolt or when it cannot be opened (the caller's own store() call
// reports that).
func (e *Env) PGStore() *postgres.Store {
	spec, err := e.StoreSpec()
	if err != nil || spec.Kind != "postgres" {
		return nil
	}
	st, err := e.store()
	if err != nil {
		return nil
	}
	pg, _ := st.(*postgres.Store)
	return pg
}

// syncManifest is what this host wrote from the store: path (relative to
// the home) → sha256.
type syncManifest map[string]string

func (e *Env) manifestPath() string { return filepath.Join(e.home, "fleet-synced.json") }

var manifestMu sync.Mutex

func (e *Env) readManifest() syncManifest {
	m := syncManifest{}
	if b, err := os.ReadFile(e.manifestPath()); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (e *Env) writeManifest(m syncManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(e.manifestPath(), b, 0o600)
}

// writeFileAtomic writes data to path through a temporary file renamed
// into place.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".sync-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// FileSHA256 is the sha256 of a regular file, "" when there is none.
func FileSHA256(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// fleetSync writes what the fleet published into this host's home, when
// the store is a PostgreSQL one: the policy, and the approved modules.
// Problems are warnings: a host that cannot sync keeps what it has (its
// modules still load only while they match their pins).
func (e *Env) fleetSync(ctx context.Context) {
	if e.fleetSynced {
		return
	}
	e.fleetSynced = true
	e.FleetResync(ctx)
}

// FleetResync syncs again (a change was announced).
func (e *Env) FleetResync(ctx context.Context) {
	pg := e.PGStore()
	if pg == nil {
		return
	}
	manifestMu.Lock()
	defer manifestMu.Unlock()
	m := e.readManifest()
	before := len(m)
	changed := false
	if c, err := e.syncPolicy(ctx, pg, m); err != nil {
		e.Logger().Warn("fleet: the published policy could not be synced", "err", err.Error())
	} else {
		changed = changed || c
	}
	if c, err := e.syncModules(ctx, pg, m); err != nil {
		e.Logger().Warn("fleet: the approved modules could not be synced", "err", err.Error())
	} else {
		changed = changed || c
	}
	if changed || len(m) != before {
		if err := e.writeManifest(m); err != nil {
			e.Logger().Warn("fleet: writing "+e.manifestPath(), "err", err.Error())
		}
	}
}

// errLocalFile means a file someone put or edited on this host is where a
// synced one would go: it is left as it is.
var errLocalFile = errors.New("put or edited on this host: left as it is")

// syncFile makes rel (under the home) hold the bytes with sha256 want,
// fetched by get, unless a file someone else put there is in the way.
func (e *Env) syncFile(m syncManifest, rel, want string, get func() ([]byte, error)) (bool, error) {
	path := filepath.Join(e.home, rel)
	cur, err := FileSHA256(path)
	if err != nil {
		return false, err
	}
	if cur == want {
		m[rel] = want
		return false, nil
	}
	if cur != "" && m[rel] != cur {
		return false, fmt.Errorf("%s (sha256 %s) was %w", path, ui.Short16(cur), errLocalFile)
	}
	data, err := get()
	if err != nil {
		return false, err
	}
	if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != want {
		return false, fmt.Errorf("the published bytes of %s do not match sha256 %s", rel, ui.Short16(want))
	}
	if err := writeFileAtomic(path, data, 0o600); err != nil {
		return false, err
	}
	m[rel] = want
	e.Logger().Info("fleet: synced from the store", "file", path, "sha256", want)
	return true, nil
}

func (e *Env) syncPolicy(ctx context.Context, pg *postgres.Store, m syncManifest) (bool, error) {
	p, err := pg.PublishedFile(ctx, PublishedPolicy)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	changed, err := e.syncFile(m, PublishedPolicy, p.SHA256, func() ([]byte, error) { return p.Data, nil })
	if errors.Is(err, errLocalFile) {
		fmt.Fprintf(e.stderr, "warden: warning: %s differs from the policy published to the fleet (sha256 %s, by %s at %s): this host keeps its own — publish it with `warden policy publish`, or remove it to take the fleet's\n",
			ui.Printable(filepath.Join(e.home, PublishedPolicy)), ui.Short16(p.SHA256), ui.Printable(p.By), p.Published.Local().Format(time.DateTime))
		return false, nil
	}
	return changed, err
}

// pinFiles is what a pin says of a module's files.
type pinFiles struct {
	SHA256        string `json:"sha256"`
	SidecarSHA256 string `json:"sidecar_sha256"`
}

func (e *Env) syncModules(ctx context.Context, pg *postgres.Store, m syncManifest) (bool, error) {
	pins, err := pg.ListPins(ctx)
	if err != nil {
		return false, err
	}
	changed := false
	var errs []error
	fetch := func(sum string) func() ([]byte, error) {
		return func() ([]byte, error) {
			b, err := pg.Artifact(ctx, "sha256:"+sum)
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("sha256 %s was approved but never published (approve it again on the host that has it)", ui.Short16(sum))
			}
			return b, err
		}
	}
	for name, doc := range pins {
		var p pinFiles
		if !gate.ValidToolName(name) || json.Unmarshal(doc, &p) != nil || !store.IsHash(p.SHA256) {
			continue
		}
		for rel, sum := range map[string]string{"tools/" + name + ".wasm": p.SHA256, "tools/" + name + ".tool.yaml": p.SidecarSHA256} {
			if sum == "" {
				continue
			}
			c, err := e.syncFile(m, rel, sum, fetch(sum))
			if errors.Is(err, errLocalFile) {
				// Installed here and not approved yet, most likely:
				// `warden tool ls` says so.
				e.Logger().Info("fleet: a module file of this host differs from the approved one", "module", name, "err", err.Error())
			} else if err != nil {
				errs = append(errs, fmt.Errorf("module %s: %w", name, err))
			}
			changed = changed || c
		}
	}
	// Files this host synced for a module whose pin is gone (removed on
	// another host) go too.
	for rel, sum := range m {
		name, ok := strings.CutPrefix(rel, "tools/")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(strings.TrimSuffix(name, ".wasm"), ".tool.yaml")
		if _, pinned := pins[name]; pinned {
			continue
		}
		path := filepath.Join(e.home, rel)
		if cur, err := FileSHA256(path); err == nil && cur == sum {
			if err := os.Remove(path); err == nil {
				changed = true
			}
		}
		delete(m, rel)
	}
	return changed, errors.Join(errs...)
}

// fleetPins are the wasm pins; on a PostgreSQL store, approving a module
// first publishes its files (bytes and sidecar, as artifacts), so the
// fleet's other hosts can fetch what was approved when they see the pin.
type fleetPins struct {
	lazyStore
	e *Env
}

func (p fleetPins) PutPin(ctx context.Context, name string, doc json.RawMessage) error {
	if pg := p.e.PGStore(); pg != nil {
		if err := p.e.publishModule(ctx, pg, name, doc); err != nil {
			return err
		}
	}
	return p.lazyStore.PutPin(ctx, name, doc)
}

func (e *Env) publishModule(ctx context.Context, pg *postgres.Store, name string, doc json.RawMessage) error {
	var p pinFiles
	if err := json.Unmarshal(doc, &p); err != nil {
		return err
	}
	manifestMu.Lock()
	defer manifestMu.Unlock()
	m := e.readManifest()
	// An install pins the module before it puts its files in place: they
	// are read where it staged them.
	wasmFile, scFile := wasmtool.ModuleFiles(filepath.Join(e.home, "tools"), name)
	for rel, want := range map[string]string{"tools/" + name + ".wasm": p.SHA256, "tools/" + name + ".tool.yaml": p.SidecarSHA256} {
		if want == "" {
			continue
		}
		path := wasmFile
		if strings.HasSuffix(rel, ".tool.yaml") {
			path = scFile
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("publishing module %s to the fleet: %w", name, err)
		}
		if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != want {
			return fmt.Errorf("publishing module %s to the fleet: %s changed while it was approved", name, path)
		}
		if _, err := pg.PutArtifact(ctx, data); err != nil {
			return fmt.Errorf("publishing module %s to the fleet: %w", name, err)
		}
		m[rel] = want // the fleet's now: a later approval elsewhere may replace it
	}
	return e.writeManifest(m)
}

// WatchFleet LISTENs for changes other hosts make (pins, trust, grants,
// the published policy) and calls reload after syncing them into this
// home, until ctx ends. It does nothing for a bbolt store.
func (e *Env) WatchFleet(ctx context.Context, reload func()) *sync.WaitGroup {
	var wg sync.WaitGroup
	pg := e.PGStore()
	if pg == nil {
		return &wg
	}
	wg.Go(func() {
		pg.Watch(ctx, func(table string) {
			e.Logger().Info("fleet: the store changed", "table", table)
			e.FleetResync(ctx)
			reload()
		})
	})
	return &wg
}

// NotePublishedPolicy records, after the policy file was published with
// sha256 sum, that the home's policy is the fleet's when file is that
// policy, so that syncing takes later publications into it.
func (e *Env) NotePublishedPolicy(file, sum string) error {
	manifestMu.Lock()
	defer manifestMu.Unlock()
	m := e.readManifest()
	if file == filepath.Join(e.home, PublishedPolicy) {
		m[PublishedPolicy] = sum
	}
	return e.writeManifest(m)
}
