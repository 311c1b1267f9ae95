package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/store"
)

// Runs, pins, grants, trust records and jobs are JSON documents under a
// name, one table each (name, doc), as the bbolt store keeps them in one
// bucket each.

type docTable struct {
	table string // warden.<table>
	kind  string // for messages and validation
}

var (
	runsTable   = docTable{"warden.runs", "run"}
	pinsTable   = docTable{"warden.pins", "pin"}
	grantsTable = docTable{"warden.grants", "grant"}
	trustTable  = docTable{"warden.trust", "trust"}
	jobsTable   = docTable{"warden.jobs", "job"}
)

func (t docTable) key() string {
	if t == runsTable {
		return "id"
	}
	return "name"
}

func (s *Store) putDoc(ctx context.Context, t docTable, name string, doc json.RawMessage) error {
	if err := store.ValidName(t.kind, name); err != nil {
		return err
	}
	v, err := store.CompactDoc(t.kind+" "+name, doc)
	if err != nil {
		return err
	}
	return s.do(ctx, "writing a "+t.kind, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO `+t.table+` VALUES ($1, $2) ON CONFLICT (`+t.key()+`) DO UPDATE SET doc = EXCLUDED.doc`, name, v)
		return err
	})
}

func (s *Store) getDoc(ctx context.Context, t docTable, name string) (json.RawMessage, error) {
	if err := store.ValidName(t.kind, name); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.do(ctx, "reading a "+t.kind, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, `SELECT doc FROM `+t.table+` WHERE `+t.key()+` = $1`, name).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s %s: %w", t.kind, name, store.ErrNotFound)
		}
		return err
	})
	return doc, err
}

func (s *Store) deleteDoc(ctx context.Context, t docTable, name string) error {
	if err := store.ValidName(t.kind, name); err != nil {
		return err
	}
	return s.do(ctx, "deleting a "+t.kind, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+t.table+` WHERE `+t.key()+` = $1`, name)
		if err == nil && tag.RowsAffected() == 0 {
			return fmt.Errorf("%s %s: %w", t.kind, name, store.ErrNotFound)
		}
		return err
	})
}

func (s *Store) listDocs(ctx context.Context, t docTable) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage)
	err := s.do(ctx, "listing "+t.kind+"s", func(ctx context.Context) error {
		clear(out)
		rows, err := s.pool.Query(ctx, `SELECT `+t.key()+`, doc FROM `+t.table)
		if err != nil {
			return err
		}
		var name string
		var doc []byte
		_, err = pgx.ForEachRow(rows, []any{&name, &doc}, func() error {
			out[name] = bytes.Clone(doc)
			return nil
		})
		return err
	})
	return out, err
}

// PutPin creates or replaces the pin of wasm tool name.
func (s *Store) PutPin(ctx context.Context, name string, doc json.RawMessage) error {
	return s.putDoc(ctx, pinsTable, name, doc)
}

// Pin returns the pin of name, or an error wrapping ErrNotFound.
func (s *Store) Pin(ctx context.Context, name string) (json.RawMessage, error) {
	return s.getDoc(ctx, pinsTable, name)
}

// DeletePin removes the pin of name, or returns an error wrapping
// ErrNotFound.
func (s *Store) DeletePin(ctx context.Context, name string) error {
	return s.deleteDoc(ctx, pinsTable, name)
}

// ListPins returns every pin by name.
func (s *Store) ListPins(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, pinsTable)
}

// PutGrant creates or replaces the grant document id.
func (s *Store) PutGrant(ctx context.Context, id string, doc json.RawMessage) error {
	return s.putDoc(ctx, grantsTable, id, doc)
}

// DeleteGrant removes grant id, or returns an error wrapping ErrNotFound.
func (s *Store) DeleteGrant(ctx context.Context, id string) error {
	return s.deleteDoc(ctx, grantsTable, id)
}

// ListGrants returns every grant document by id.
func (s *Store) ListGrants(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, grantsTable)
}

// PutTrust records the trust document of a policy file.
func (s *Store) PutTrust(ctx context.Context, path string, doc json.RawMessage) error {
	return s.putDoc(ctx, trustTable, path, doc)
}

// Trust returns the trust document of path, or an error wrapping
// ErrNotFound.
func (s *Store) Trust(ctx context.Context, path string) (json.RawMessage, error) {
	return s.getDoc(ctx, trustTable, path)
}

// DeleteTrust removes the trust document of path, or returns an error
// wrapping ErrNotFound.
func (s *Store) DeleteTrust(ctx context.Context, path string) error {
	return s.deleteDoc(ctx, trustTable, path)
}

// ListTrust returns every trust document by path.
func (s *Store) ListTrust(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, trustTable)
}

// CreateJob stores a new job; a name already taken is an error wrapping
// ErrInvalid.
func (s *Store) CreateJob(ctx context.Context, id string, doc json.RawMessage) error {
	if err := store.ValidName("job", id); err != nil {
		return err
	}
	v, err := store.CompactDoc("job "+id, doc)
	if err != nil {
		return err
	}
	return s.do(ctx, "creating a job", func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `INSERT INTO warden.jobs VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, v)
		if err == nil && tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: a job named %s exists", store.ErrInvalid, id)
		}
		return err
	})
}

// Job returns job id's document, or an error wrapping ErrNotFound.
func (s *Store) Job(ctx context.Context, id string) (json.RawMessage, error) {
	return s.getDoc(ctx, jobsTable, id)
}

// UpdateJob replaces job id's document by what fn makes of it, in one
// transaction holding the job's row; fn's error aborts the change and is
// returned. fn may be called again if the transaction is retried.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(doc json.RawMessage) (json.RawMessage, error)) error {
	return s.updateDoc(ctx, jobsTable, id, fn)
}

// updateDoc replaces the document under name by what fn makes of it, in
// one transaction holding its row (SELECT … FOR UPDATE): a write of it
// from another connection waits until this one commits. fn's error aborts
// the change and is returned; fn may be called again if the transaction
// is retried.
func (s *Store) updateDoc(ctx context.Context, t docTable, name string, fn func(doc json.RawMessage) (json.RawMessage, error)) error {
	if err := store.ValidName(t.kind, name); err != nil {
		return err
	}
	return s.inTx(ctx, "updating a "+t.kind, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		var doc []byte
		err := tx.QueryRow(ctx, `SELECT doc FROM `+t.table+` WHERE `+t.key()+` = $1 FOR UPDATE`, name).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s %s: %w", t.kind, name, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		nd, err := fn(doc)
		if err != nil {
			return err
		}
		v, err := store.CompactDoc(t.kind+" "+name, nd)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+t.table+` SET doc = $2 WHERE `+t.key()+` = $1`, name, v)
		return err
	})
}

// DeleteJob removes job id, or returns an error wrapping ErrNotFound.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	return s.deleteDoc(ctx, jobsTable, id)
}

// ListJobs returns every job document by name.
func (s *Store) ListJobs(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, jobsTable)
}

// Artifacts are stored by content in chunks of artifactChunk bytes.
const artifactChunk = 1 << 20

// PutArtifact stores data and returns its digest, "sha256:<hex>". Storing
// the same bytes again, from any host, changes nothing.
func (s *Store) PutArtifact(ctx context.Context, data []byte) (string, error) {
	digest := store.Digest(data)
	sum := sha256.Sum256(data)
	chunks := (len(data) + artifactChunk - 1) / artifactChunk
	err := s.inTx(ctx, "storing an artifact", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO warden.artifacts VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, sum[:], int64(len(data)), chunks)
		if err != nil || tag.RowsAffected() == 0 {
			return err // stored already (or by a writer that just committed)
		}
		var b pgx.Batch
		for i := range chunks {
			b.Queue(`INSERT INTO warden.artifact_chunks VALUES ($1, $2, $3)`, sum[:], i, data[i*artifactChunk:min(len(data), (i+1)*artifactChunk)])
		}
		return tx.SendBatch(ctx, &b).Close()
	})
	return digest, err
}

// Artifact returns the bytes stored under digest, or an error wrapping
// ErrNotFound; ErrCorrupt if they no longer hash to the digest.
func (s *Store) Artifact(ctx context.Context, digest string) ([]byte, error) {
	key, err := store.ParseDigest(digest)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = s.inTx(ctx, "reading an artifact", readOnly, func(ctx context.Context, tx pgx.Tx) error {
		var size int64
		var chunks int
		err := tx.QueryRow(ctx, `SELECT size, chunks FROM warden.artifacts WHERE digest = $1`, key).Scan(&size, &chunks)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("artifact %s: %w", digest, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		data = make([]byte, 0, size)
		rows, err := tx.Query(ctx, `SELECT n, data FROM warden.artifact_chunks WHERE digest = $1 ORDER BY n`, key)
		if err != nil {
			return err
		}
		var n int
		var chunk []byte
		want := 0
		_, err = pgx.ForEachRow(rows, []any{&n, &chunk}, func() error {
			if n != want {
				return s.corruptf("artifact %s is missing chunk %d", digest, want)
			}
			want++
			data = append(data, chunk...)
			return nil
		})
		if err == nil && want != chunks {
			err = s.corruptf("artifact %s has %d of its %d chunks", digest, want, chunks)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], key) {
		return nil, s.corruptf("artifact %s no longer matches its digest", digest)
	}
	return data, nil
}
