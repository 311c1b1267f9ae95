package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wardenrt/warden/store"
)

// The schema lives in its own PostgreSQL schema, "warden", so a database
// can hold other things too. Names, namespaces and keys are text in the "C"
// collation (ordered by bytes, as the bbolt store orders them); values and
// documents are bytea (they may hold any bytes a bbolt store accepts).

// migration is one step of the schema. Steps are applied in order, each in
// its own transaction, under an advisory lock so that two hosts migrating
// at once apply each step once.
type migration struct {
	version     int
	description string
	sql         string
}

var migrations = []migration{
	{1, "audit chain, memory, runs, artifacts, pins, grants, trust, jobs", `
CREATE TABLE warden.meta (
	key   text COLLATE "C" PRIMARY KEY,
	value text NOT NULL
);
INSERT INTO warden.meta VALUES ('format', 'warden.store/v1'), ('store_id', gen_random_uuid()::text);

-- The audit log. Each record's hash covers prev, seq, ts and event (see
-- store.EncodeRecord); the database additionally refuses a record that does
-- not extend the chain (seq = last+1, prev = last's hash), and any change to
-- a record.
CREATE TABLE warden.audit (
	seq       bigint PRIMARY KEY CHECK (seq > 0),
	ts        text NOT NULL,
	prev_hash text COLLATE "C" NOT NULL UNIQUE,
	hash      text COLLATE "C" NOT NULL,
	event     bytea NOT NULL
);
-- The head: one row every writer locks, so appends from every host
-- serialise on it.
CREATE TABLE warden.audit_head (
	one  boolean PRIMARY KEY DEFAULT true CHECK (one),
	seq  bigint NOT NULL,
	hash text COLLATE "C" NOT NULL
);
INSERT INTO warden.audit_head VALUES (true, 0, '` + store.ZeroHash + `');
-- Each host's anchor, as it last wrote it to its own disk.
CREATE TABLE warden.audit_anchors (
	host    text COLLATE "C" PRIMARY KEY,
	seq     bigint NOT NULL,
	hash    text COLLATE "C" NOT NULL,
	updated timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION warden.audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'warden audit records cannot be changed or removed (% refused)', TG_OP
		USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON warden.audit
	FOR EACH ROW EXECUTE FUNCTION warden.audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON warden.audit
	FOR EACH STATEMENT EXECUTE FUNCTION warden.audit_append_only();

CREATE FUNCTION warden.audit_extends_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	last text;
BEGIN
	IF NEW.seq = 1 THEN
		last := '` + store.ZeroHash + `';
	ELSE
		SELECT hash INTO last FROM warden.audit WHERE seq = NEW.seq - 1;
	END IF;
	IF last IS NULL OR last <> NEW.prev_hash THEN
		RAISE EXCEPTION 'audit record % does not extend the chain', NEW.seq
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER audit_extends_chain BEFORE INSERT ON warden.audit
	FOR EACH ROW EXECUTE FUNCTION warden.audit_extends_chain();

-- Memory: lexemes holds warden's own terms of the value (the GIN index
-- finds candidates), tf their frequencies and dl the value's length in
-- terms (warden's BM25 ranks the candidates); memory_stats the count and
-- total length per namespace.
CREATE TABLE warden.memory (
	ns         text COLLATE "C" NOT NULL,
	key        text COLLATE "C" NOT NULL,
	value      bytea NOT NULL,
	created_ns bigint NOT NULL,
	updated_ns bigint NOT NULL,
	dl         integer NOT NULL,
	tf         jsonb NOT NULL,
	lexemes    tsvector NOT NULL,
	PRIMARY KEY (ns, key)
);
CREATE INDEX memory_lexemes ON warden.memory USING gin (lexemes);
CREATE TABLE warden.memory_stats (
	ns    text COLLATE "C" PRIMARY KEY,
	docs  bigint NOT NULL,
	total bigint NOT NULL
);

CREATE TABLE warden.runs (id text COLLATE "C" PRIMARY KEY, doc bytea NOT NULL);
CREATE TABLE warden.pins (name text COLLATE "C" PRIMARY KEY, doc bytea NOT NULL);
CREATE TABLE warden.grants (name text COLLATE "C" PRIMARY KEY, doc bytea NOT NULL);
CREATE TABLE warden.trust (name text COLLATE "C" PRIMARY KEY, doc bytea NOT NULL);
CREATE TABLE warden.jobs (name text COLLATE "C" PRIMARY KEY, doc bytea NOT NULL);

-- Artifacts by content: the raw SHA-256, the size, and the bytes in chunks
-- of at most 1 MiB.
CREATE TABLE warden.artifacts (
	digest bytea PRIMARY KEY CHECK (length(digest) = 32),
	size   bigint NOT NULL,
	chunks integer NOT NULL
);
CREATE TABLE warden.artifact_chunks (
	digest bytea NOT NULL REFERENCES warden.artifacts,
	n      integer NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (digest, n)
);

-- Changes other hosts want to notice (LISTEN warden_changes): the payload
-- is the table's name.
CREATE FUNCTION warden.notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('warden_changes', TG_TABLE_NAME);
	RETURN NULL;
END $$;
CREATE TRIGGER pins_changed AFTER INSERT OR UPDATE OR DELETE ON warden.pins
	FOR EACH STATEMENT EXECUTE FUNCTION warden.notify_change();
CREATE TRIGGER trust_changed AFTER INSERT OR UPDATE OR DELETE ON warden.trust
	FOR EACH STATEMENT EXECUTE FUNCTION warden.notify_change();
CREATE TRIGGER grants_changed AFTER INSERT OR UPDATE OR DELETE ON warden.grants
	FOR EACH STATEMENT EXECUTE FUNCTION warden.notify_change();
`},
	{2, "leased firings of scheduled jobs", `
-- One row per firing of a job, under its dedupe key (job, fire): whoever
-- inserts it runs it, under a lease (lease_until, on the database's clock)
-- with a fencing token; a firing whose lease expired is taken over by the
-- next claimer (attempt + 1). Rows of a removed job go with it.
CREATE SEQUENCE warden.job_fence;
CREATE TABLE warden.job_firings (
	job         text COLLATE "C" NOT NULL REFERENCES warden.jobs ON DELETE CASCADE,
	fire_ns     bigint NOT NULL,
	attempt     integer NOT NULL,
	holder      text NOT NULL,
	token       bigint NOT NULL,
	lease_until timestamptz NOT NULL,
	state       text NOT NULL CHECK (state IN ('running', 'done')),
	claimed     timestamptz NOT NULL DEFAULT clock_timestamp(),
	finished    timestamptz,
	PRIMARY KEY (job, fire_ns)
);
CREATE INDEX job_firings_running ON warden.job_firings (lease_until) WHERE state = 'running';
`},
	{3, "files published to the fleet", `
-- Files an owner publishes to every host of the fleet (the home policy),
-- by name; hosts write them into their homes and reload.
CREATE TABLE warden.published (
	name      text COLLATE "C" PRIMARY KEY,
	sha256    text NOT NULL,
	data      bytea NOT NULL,
	published timestamptz NOT NULL DEFAULT clock_timestamp(),
	by_host   text NOT NULL
);
CREATE TRIGGER published_changed AFTER INSERT OR UPDATE OR DELETE ON warden.published
	FOR EACH STATEMENT EXECUTE FUNCTION warden.notify_change();
`},
	{4, "audit records by tool and by run", `
-- An event's top-level field "tool" or "run_id" as warden reads it (the
-- last member of that name, if it is a non-empty string), for the indexes
-- that list a tool's or a run's records without reading the others. An
-- event PostgreSQL cannot read as jsonb (a \u0000 escape, a lone
-- surrogate, bytes that are not UTF-8), or read exactly as warden does (a
-- database not in UTF8), gives '': listings read those records too and
-- leave the choice to warden. The indexes are the database's own, derived
-- from the stored events: warden's role cannot write them.
CREATE FUNCTION warden.audit_field(event bytea, name text) RETURNS text
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
	doc jsonb;
BEGIN
	IF current_setting('server_encoding') <> 'UTF8' THEN
		RETURN '';
	END IF;
	BEGIN
		doc := convert_from(event, 'UTF8')::jsonb;
	EXCEPTION WHEN others THEN
		RETURN '';
	END;
	IF jsonb_typeof(doc) = 'object' AND jsonb_typeof(doc -> name) = 'string' AND doc ->> name <> '' THEN
		RETURN doc ->> name;
	END IF;
	RETURN NULL;
END $$;
CREATE INDEX audit_by_tool ON warden.audit (warden.audit_field(event, 'tool'), seq);
CREATE INDEX audit_by_run ON warden.audit (warden.audit_field(event, 'run_id'), seq);
`},
	{5, "runs kept in parts", `
-- A run written in parts (PatchRun): doc is its head, with each list named
-- in list_fields null; run_items holds the lists' elements. A run written
-- whole has no list_fields and no items.
ALTER TABLE warden.runs ADD COLUMN list_fields text[], ADD COLUMN list_lens integer[];
CREATE TABLE warden.run_items (
	id   text COLLATE "C" NOT NULL,
	list smallint NOT NULL,
	n    integer NOT NULL,
	doc  bytea NOT NULL,
	PRIMARY KEY (id, list, n)
);
`},
}

// SchemaVersion is the schema version this warden reads and writes.
var SchemaVersion = migrations[len(migrations)-1].version

// grants are the privileges of the role warden connects as: it may add
// audit records and move the head and its own anchor, never change or
// remove a record; everything else it reads and writes.
var grants = []string{
	`GRANT USAGE ON SCHEMA warden TO %[1]s`,
	`GRANT SELECT ON warden.meta, warden.schema_migrations TO %[1]s`,
	`GRANT SELECT, INSERT ON warden.audit TO %[1]s`,
	`GRANT SELECT, UPDATE ON warden.audit_head TO %[1]s`,
	`GRANT SELECT, INSERT, UPDATE ON warden.audit_anchors TO %[1]s`,
	`GRANT SELECT, INSERT, UPDATE, DELETE ON warden.memory, warden.memory_stats, warden.runs, warden.run_items, warden.pins,
		warden.grants, warden.trust, warden.jobs TO %[1]s`,
	`GRANT SELECT, INSERT ON warden.artifacts, warden.artifact_chunks TO %[1]s`,
	`GRANT SELECT, INSERT, UPDATE, DELETE ON warden.job_firings TO %[1]s`,
	`GRANT USAGE ON SEQUENCE warden.job_fence TO %[1]s`,
	`GRANT SELECT, INSERT, UPDATE, DELETE ON warden.published TO %[1]s`,
}

// readSchema returns the schema version (0 when there is none) and the
// store id.
func readSchema(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, string, error) {
	var version int
	err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM warden.schema_migrations`).Scan(&version)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") {
		return 0, "", nil // undefined table or schema
	}
	if err != nil {
		return 0, "", err
	}
	var id string
	if version > 0 {
		if err := q.QueryRow(ctx, `SELECT value FROM warden.meta WHERE key = 'store_id'`).Scan(&id); err != nil {
			return 0, "", err
		}
	}
	return version, id, nil
}

// MigrateOptions configures Migrate.
type MigrateOptions struct {
	// GrantTo names a role to give the privileges warden needs (and no
	// more: it cannot change or remove audit records). Migrate runs as
	// the schema's owner; warden itself should connect as this role.
	GrantTo string
	// Timeout bounds the whole migration; 0 means 5 minutes.
	Timeout time.Duration
}

// MigrateResult says what Migrate did.
type MigrateResult struct {
	From    int    `json:"from"`
	To      int    `json:"to"`
	StoreID string `json:"store_id"`
	Applied []int  `json:"applied,omitempty"`
}

// Migrate creates or upgrades the warden schema of the database at url to
// SchemaVersion. It is idempotent, and safe to run from several hosts at
// once: each step is applied once, in its own transaction, under an
// advisory lock.
func Migrate(ctx context.Context, url string, o *MigrateOptions) (MigrateResult, error) {
	var opts MigrateOptions
	if o != nil {
		opts = *o
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.GrantTo != "" && !validRole(opts.GrantTo) {
		return MigrateResult{}, fmt.Errorf("postgres: %w: role name %q: use letters, digits and _", store.ErrInvalid, opts.GrantTo)
	}
	pool, safe, err := newPool(ctx, url, opts.Timeout)
	if err != nil {
		return MigrateResult{}, err
	}
	defer pool.Close()
	s := &Store{pool: pool, url: safe, timeout: opts.Timeout}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var res MigrateResult
	err = s.retry(ctx, func(ctx context.Context) error {
		var err error
		res.From, _, err = readSchema(ctx, pool)
		return err
	})
	if err != nil {
		return res, s.wrap(ctx, "reading the schema version", err)
	}
	if res.From > SchemaVersion {
		return res, &SchemaError{URL: safe, Have: res.From, Want: SchemaVersion}
	}
	for _, m := range migrations {
		applied := false
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('warden.migrate'))`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS warden;
				CREATE TABLE IF NOT EXISTS warden.schema_migrations (
					version     integer PRIMARY KEY,
					description text NOT NULL,
					applied     timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM warden.schema_migrations WHERE version = $1)`, m.version).Scan(&done); err != nil || done {
				return err
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.version, m.description, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO warden.schema_migrations (version, description) VALUES ($1, $2)`, m.version, m.description); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return res, s.wrap(ctx, "migrating", err)
		}
		if applied {
			res.Applied = append(res.Applied, m.version)
		}
	}
	if opts.GrantTo != "" {
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			for _, g := range grants {
				if _, err := tx.Exec(ctx, fmt.Sprintf(g, pgx.Identifier{opts.GrantTo}.Sanitize())); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return res, s.wrap(ctx, "granting privileges to "+opts.GrantTo, err)
		}
	}
	res.To, res.StoreID, err = readSchema(ctx, pool)
	return res, s.wrap(ctx, "reading the schema version", err)
}

func validRole(name string) bool {
	return name != "" && len(name) <= 63 && strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0
}
