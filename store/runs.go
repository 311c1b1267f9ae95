package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Runs, wasm tool pins, grants and trust records are JSON documents stored under a caller-chosen
// name; the store only checks that they are JSON and stores them compacted.

// compactJSON checks that doc is one JSON value and compacts it.
func compactJSON(what string, doc []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, doc); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %v", ErrInvalid, what, err)
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	}
	return buf.Bytes(), nil
}

// putDoc stores doc under name in bucket.
func (s *Store) putDoc(ctx context.Context, bucket []byte, kind, name string, doc json.RawMessage) error {
	if err := validName(kind, name); err != nil {
		return err
	}
	v, err := compactJSON(kind+" "+name, doc)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(name), v)
	})
}

// getDoc returns a copy of the document under name in bucket.
func (s *Store) getDoc(ctx context.Context, bucket []byte, kind, name string) (json.RawMessage, error) {
	if err := validName(kind, name); err != nil {
		return nil, err
	}
	var doc json.RawMessage
	err := s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(name))
		if v == nil {
			return fmt.Errorf("%s %s: %w", kind, name, ErrNotFound)
		}
		doc = bytes.Clone(v)
		return nil
	})
	return doc, err
}

// PutRun creates or replaces the document of run id, whole (dropping the
// parts PatchRun left). Run ids are chosen by the caller and sort in time
// order (ListRuns relies on it).
func (s *Store) PutRun(ctx context.Context, id string, doc json.RawMessage) error {
	if err := validName("run", id); err != nil {
		return err
	}
	v, err := compactJSON("run "+id, doc)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		if err := dropRunParts(tx, id); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put([]byte(id), v)
	})
}

// Run returns the document of run id, or an error wrapping ErrNotFound.
func (s *Store) Run(ctx context.Context, id string) (json.RawMessage, error) {
	if err := validName("run", id); err != nil {
		return nil, err
	}
	var doc json.RawMessage
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		if doc, err = readRun(s.path, tx, id); err == nil && doc == nil {
			err = fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		return err
	})
	return doc, err
}

// UpdateRun replaces run id's document by what fn makes of it, in one
// transaction: a compare-and-set (a run marked interrupted only if it is
// still running). fn's error aborts the change and is returned; a missing
// run is an error wrapping ErrNotFound. The new document is stored whole.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(doc json.RawMessage) (json.RawMessage, error)) error {
	if err := validName("run", id); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		doc, err := readRun(s.path, tx, id)
		if err == nil && doc == nil {
			err = fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if doc, err = fn(doc); err != nil {
			return err
		}
		v, err := compactJSON("run "+id, doc)
		if err != nil {
			return err
		}
		if err := dropRunParts(tx, id); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put([]byte(id), v)
	})
}

// ListRuns returns run documents newest (largest id) first, at most limit
// of them (<= 0: all).
func (s *Store) ListRuns(ctx context.Context, limit int) ([]json.RawMessage, error) {
	var out []json.RawMessage
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if limit > 0 && len(out) >= limit {
				break
			}
			if len(out)%256 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			doc, err := readRun(s.path, tx, string(k))
			if err != nil {
				return err
			}
			out = append(out, doc)
		}
		return nil
	})
	return out, err
}

// PutPin creates or replaces the pin of wasm tool name.
func (s *Store) PutPin(ctx context.Context, name string, doc json.RawMessage) error {
	return s.putDoc(ctx, bucketPins, "pin", name, doc)
}

// Pin returns the pin of wasm tool name, or an error wrapping ErrNotFound.
func (s *Store) Pin(ctx context.Context, name string) (json.RawMessage, error) {
	return s.getDoc(ctx, bucketPins, "pin", name)
}

// DeletePin removes the pin of name, or returns an error wrapping
// ErrNotFound.
func (s *Store) DeletePin(ctx context.Context, name string) error {
	return s.deleteDoc(ctx, bucketPins, "pin", name)
}

// ListPins returns every pin by name.
func (s *Store) ListPins(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, bucketPins)
}

// deleteDoc removes the document under name in bucket, or returns an error
// wrapping ErrNotFound.
func (s *Store) deleteDoc(ctx context.Context, bucket []byte, kind, name string) error {
	if err := validName(kind, name); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("%s %s: %w", kind, name, ErrNotFound)
		}
		return b.Delete([]byte(name))
	})
}

// listDocs returns every document of bucket by name.
func (s *Store) listDocs(ctx context.Context, bucket []byte) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			out[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	return out, err
}

// Grants that expire and remembered approvals are documents under their id
// (warden grant add, "allow for 1 hour"); trusted policy files are
// documents under their absolute path. The store keeps them as it keeps
// pins; what they mean is the caller's.

// PutGrant creates or replaces the grant document id.
func (s *Store) PutGrant(ctx context.Context, id string, doc json.RawMessage) error {
	return s.putDoc(ctx, bucketGrants, "grant", id, doc)
}

// DeleteGrant removes grant id, or returns an error wrapping ErrNotFound.
func (s *Store) DeleteGrant(ctx context.Context, id string) error {
	return s.deleteDoc(ctx, bucketGrants, "grant", id)
}

// ListGrants returns every grant document by id.
func (s *Store) ListGrants(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, bucketGrants)
}

// PutTrust records the trust document of a policy file (by absolute path).
func (s *Store) PutTrust(ctx context.Context, path string, doc json.RawMessage) error {
	return s.putDoc(ctx, bucketTrust, "trust", path, doc)
}

// Trust returns the trust document of path, or an error wrapping
// ErrNotFound.
func (s *Store) Trust(ctx context.Context, path string) (json.RawMessage, error) {
	return s.getDoc(ctx, bucketTrust, "trust", path)
}

// DeleteTrust removes the trust document of path, or returns an error
// wrapping ErrNotFound.
func (s *Store) DeleteTrust(ctx context.Context, path string) error {
	return s.deleteDoc(ctx, bucketTrust, "trust", path)
}

// ListTrust returns every trust document by path.
func (s *Store) ListTrust(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, bucketTrust)
}

// Scheduled jobs are documents under their name. UpdateJob changes one in
// a single transaction, so two processes changing the same job (a pause
// from the CLI, a run recorded by the daemon) never lose each other's
// change.

// CreateJob stores a new job; a name already taken is an error wrapping
// ErrInvalid.
func (s *Store) CreateJob(ctx context.Context, id string, doc json.RawMessage) error {
	if err := validName("job", id); err != nil {
		return err
	}
	v, err := compactJSON("job "+id, doc)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b.Get([]byte(id)) != nil {
			return fmt.Errorf("%w: a job named %s exists", ErrInvalid, id)
		}
		return b.Put([]byte(id), v)
	})
}

// Job returns job id's document, or an error wrapping ErrNotFound.
func (s *Store) Job(ctx context.Context, id string) (json.RawMessage, error) {
	return s.getDoc(ctx, bucketJobs, "job", id)
}

// UpdateJob replaces job id's document by what fn makes of it, in one
// transaction; fn's error aborts the change and is returned.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(doc json.RawMessage) (json.RawMessage, error)) error {
	return s.updateDoc(ctx, bucketJobs, "job", id, fn)
}

// updateDoc replaces the document under name in bucket by what fn makes
// of it, in one write transaction: no other write of it comes between
// fn's read and the write. fn's error aborts the change and is returned;
// a missing document is an error wrapping ErrNotFound.
func (s *Store) updateDoc(ctx context.Context, bucket []byte, kind, name string, fn func(doc json.RawMessage) (json.RawMessage, error)) error {
	if err := validName(kind, name); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		v := b.Get([]byte(name))
		if v == nil {
			return fmt.Errorf("%s %s: %w", kind, name, ErrNotFound)
		}
		doc, err := fn(bytes.Clone(v))
		if err != nil {
			return err
		}
		nv, err := compactJSON(kind+" "+name, doc)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), nv)
	})
}

// DeleteJob removes job id, or returns an error wrapping ErrNotFound.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	return s.deleteDoc(ctx, bucketJobs, "job", id)
}

// ListJobs returns every job document by name.
func (s *Store) ListJobs(ctx context.Context) (map[string]json.RawMessage, error) {
	return s.listDocs(ctx, bucketJobs)
}
