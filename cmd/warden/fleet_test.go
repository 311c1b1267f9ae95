//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
	"github.com/wardenrt/warden/store/postgres/pgtest"
)

// fleet is one PostgreSQL store shared by warden hosts: a database whose
// schema the superuser migrated, granting a role of its own to warden.
type fleet struct {
	t     testing.TB
	srv   *pgtest.Server
	db    string
	admin string // the superuser's URL
	app   string // warden's role's URL
	bin   string
	dir   string
}

func newFleet(t testing.TB) *fleet {
	t.Helper()
	srv := pgtest.Shared(t, pgtest.Config{})
	bin, err := exec.LookPath("warden")
	if err != nil {
		t.Fatal(err)
	}
	db := srv.Database(t)
	role := "warden_" + db
	ctx := context.Background()
	if err := srv.Exec(ctx, "postgres", "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		srv.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+role)
	})
	f := &fleet{t: t, srv: srv, db: db, admin: srv.URL(db), app: srv.URLAs(role, "", db), bin: bin, dir: t.TempDir()}
	if out, err := exec.Command(bin, "--home", filepath.Join(f.dir, "admin"), "--store", f.admin, "store", "migrate", "--grant-to", role).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "schema migrated from version 0") {
		t.Fatalf("store migrate: %v\n%s", err, out)
	}
	return f
}

// fleetHost is one warden host of a fleet: its own home and workspace,
// the fleet's store, its own name.
type fleetHost struct {
	f        *fleet
	name     string
	home, ws string
}

func (f *fleet) host(name string) *fleetHost {
	h := &fleetHost{f: f, name: name, home: filepath.Join(f.dir, name, "home"), ws: filepath.Join(f.dir, name, "ws")}
	for _, d := range []string{h.home, h.ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			f.t.Fatal(err)
		}
	}
	return h
}

func (h *fleetHost) command(args ...string) *exec.Cmd {
	cmd := exec.Command(h.f.bin, args...)
	cmd.Env = append(os.Environ(), "WARDEN_HOME="+h.home, "WARDEN_WORKSPACE="+h.ws, "WARDEN_STORE="+h.f.app,
		"WARDEN_HOST="+h.name, "WARDEN_APPROVE=", "WARDEN_LOG_LEVEL=error")
	return cmd
}

func (h *fleetHost) run(args ...string) string {
	h.f.t.Helper()
	out, err := h.command(args...).CombinedOutput()
	if err != nil {
		h.f.t.Fatalf("%s: warden %s: %v\n%s", h.name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (h *fleetHost) write(rel, content string) string {
	p := filepath.Join(h.ws, rel)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		h.f.t.Fatal(err)
	}
	return p
}

// TestFleetCalls: 8 warden processes (on 4 hosts) make 200 calls each
// against one PostgreSQL store at once: 1,600 results on one log that
// verifies — no gap, no fork — on every host; the role warden connects as
// cannot change a record; a superuser's edit is caught.
func TestFleetCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("1,600 calls from 8 processes")
	}
	f := newFleet(t)
	items := make([]string, 200)
	for i := range items {
		items[i] = fmt.Sprint(i + 1)
	}
	wf := `version: 1
name: fleet
grants: ["system.info"]
steps:
  - {id: call, tool: system, args: {operation: get_info}, foreach: [` + strings.Join(items, ", ") + `]}
`
	var hosts []*fleetHost
	for i := range 4 {
		h := f.host(fmt.Sprintf("host-%d", i))
		h.write("fleet.yaml", wf)
		hosts = append(hosts, h)
	}
	var wg sync.WaitGroup
	for p := range 8 {
		h := hosts[p%4]
		wg.Go(func() {
			out, err := h.command("--grant", "system.info", "workflow", "run", filepath.Join(h.ws, "fleet.yaml")).CombinedOutput()
			if err != nil {
				t.Errorf("process %d on %s: %v\n%s", p, h.name, err, out)
			}
		})
	}
	wg.Wait()
	var recs []store.AuditRecord
	if err := json.Unmarshal([]byte(hosts[0].run("audit", "ls", "--tool", "system", "--json")), &recs); err != nil {
		t.Fatal(err)
	}
	results := 0
	for _, r := range recs {
		var ev gate.AuditEvent
		if err := json.Unmarshal(r.Event, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Phase == gate.PhaseResult && ev.Outcome == "ok" {
			results++
		}
	}
	if results != 1600 {
		t.Errorf("%d successful results on the log, want 1600", results)
	}
	for _, h := range hosts {
		if out := h.run("audit", "verify"); !strings.Contains(out, "audit log OK") {
			t.Errorf("%s: audit verify: %s", h.name, out)
		}
	}
	st := hosts[0].run("store", "status")
	for _, h := range hosts {
		if !strings.Contains(st, h.name+": anchor #") || strings.Contains(st, h.name+": anchor #0 ") {
			t.Errorf("store status does not show %s's anchor:\n%s", h.name, st)
		}
	}

	// The role warden connects as cannot change a record; a superuser
	// can (with the trigger off), and verify names the record.
	ctx := context.Background()
	if err := f.srv.Exec(ctx, f.db, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := execURL(ctx, f.app, `UPDATE warden.audit SET event = '{}' WHERE seq = 7`); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("UPDATE of a record by warden's role: %v", err)
	}
	if err := execURL(ctx, f.app, `DELETE FROM warden.audit WHERE seq = 7`); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("DELETE of a record by warden's role: %v", err)
	}
	if err := execURL(ctx, f.admin, `BEGIN; SET LOCAL session_replication_role = replica;
		UPDATE warden.audit SET event = convert_to(replace(convert_from(event, 'UTF8'), 'get_info', 'get_inf0'), 'UTF8') WHERE seq = 7; COMMIT`); err != nil {
		t.Fatal(err)
	}
	out, err := hosts[2].command("audit", "verify").CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("AUDIT_TAMPERED")) || !bytes.Contains(out, []byte("first bad record #7")) {
		t.Errorf("audit verify after a superuser's edit: %v\n%s", err, out)
	}
}

// execURL runs sql on the database at url.
func execURL(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// TestStoreCopy: `warden store copy` moves a bbolt home with 10,000 audit
// records (and memory, runs, artifacts — one large enough to be chunked —,
// pins, grants, trust records, jobs) into PostgreSQL: the same records and
// a chain that verifies there.
func TestStoreCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 records")
	}
	f := newFleet(t)
	h := f.host("laptop")
	ctx := context.Background()
	src := filepath.Join(h.home, "warden.db")
	bs, err := store.Open(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 50 {
		wg.Go(func() {
			for i := range 200 {
				if _, err := bs.AppendAudit(ctx, json.RawMessage(fmt.Sprintf(`{"phase":"result","tool":"fs_read","w":%d,"i":%d,"s":"é\u2028<&>"}`, w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range 300 {
		if err := bs.PutMemory(ctx, fmt.Sprintf("ns%d", i%3), fmt.Sprintf("k%03d", i), fmt.Sprintf("note %d about the zeppelin release %d", i, i%7)); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB: four chunks
	big[len(big)-1] = 'x'                                    // the last chunk differs from the others
	artifacts := map[string][]byte{}                         // digest → bytes
	for _, data := range [][]byte{big, []byte("small"), {}} {
		d, err := bs.PutArtifact(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		artifacts[d] = data
	}
	for i := range 20 {
		if err := bs.PutRun(ctx, fmt.Sprintf("2026-run-%02d", i), json.RawMessage(fmt.Sprintf(`{"id":"2026-run-%02d","status":"succeeded"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(bs.PutPin(ctx, "textstats", json.RawMessage(`{"sha256":"aa"}`)))
	must(bs.PutPin(ctx, "wordcount", json.RawMessage(`{"sha256":"cc","sidecar_sha256":"dd"}`)))
	must(bs.PutGrant(ctx, "g1", json.RawMessage(`{"id":"g1","grant":"exec:git"}`)))
	must(bs.PutGrant(ctx, "g2", json.RawMessage(`{"id":"g2","grant":"fs.read:docs/**"}`)))
	must(bs.PutTrust(ctx, "sha256:abc", json.RawMessage(`{"sha256":"bb"}`)))
	must(bs.PutTrust(ctx, "sha256:def", json.RawMessage(`{"sha256":"ee","by":"owner"}`)))
	must(bs.CreateJob(ctx, "nightly", json.RawMessage(`{"id":"nightly"}`)))
	must(bs.CreateJob(ctx, "hourly", json.RawMessage(`{"id":"hourly","every":"1h"}`)))
	want, err := bs.ListMemory(ctx, "", 0)
	must(err)
	type docList struct {
		what string
		list func(context.Context) (map[string]json.RawMessage, error)
		src  map[string]json.RawMessage
	}
	docs := []*docList{{what: "pins", list: bs.ListPins}, {what: "grants", list: bs.ListGrants}, {what: "trust records", list: bs.ListTrust}, {what: "jobs", list: bs.ListJobs}}
	for _, d := range docs {
		d.src, err = d.list(ctx)
		must(err)
		if len(d.src) != 2 {
			t.Fatalf("the source holds %d %s, want 2", len(d.src), d.what)
		}
	}
	must(bs.Close())

	out := h.run("store", "copy", "--from", "bbolt:"+src, "--to", f.app)
	if !strings.Contains(out, "10000 audit records") || !strings.Contains(out, "300 memory entries") || !strings.Contains(out, "3 artifacts") {
		t.Fatalf("store copy: %s", out)
	}
	if out := h.run("audit", "verify"); !strings.Contains(out, "audit log OK: 10001 records") {
		t.Errorf("audit verify of the copy: %s", out)
	}
	// The same records, byte for byte (the copy adds its own record).
	srcLog := h.run("--store", "bbolt:"+src, "audit", "export")
	dstLog := h.run("audit", "export")
	if lines := strings.Split(srcLog, "\n"); len(lines) != 10001 || !strings.HasPrefix(dstLog, srcLog) {
		t.Errorf("exports differ: source %d lines, copy %d lines", len(lines), strings.Count(dstLog, "\n"))
	}
	if last := dstLog[len(srcLog):]; !strings.Contains(last, `"tool":"store.copy"`) {
		t.Errorf("the copy's own record: %s", last)
	}
	var got []store.MemoryEntry
	must(json.Unmarshal([]byte(h.run("memory", "ls", "--json")), &got))
	if len(got) != len(want) {
		t.Fatalf("memory: %d entries copied, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Namespace != want[i].Namespace || got[i].Key != want[i].Key || got[i].Value != want[i].Value ||
			!got[i].Created.Equal(want[i].Created) || !got[i].Updated.Equal(want[i].Updated) {
			t.Errorf("memory entry %d: %+v, want %+v", i, got[i], want[i])
			break
		}
	}
	if out := h.run("memory", "search", "zeppelin release 3", "--json"); !strings.Contains(out, `"key": "k003"`) {
		t.Errorf("search in the copy: %s", out)
	}
	if out := h.run("runs", "ls"); strings.Count(out, "2026-run-") != 20 {
		t.Errorf("runs ls of the copy:\n%s", out)
	}
	if out := h.run("store", "status", "--json"); !strings.Contains(out, `"audit_head_seq": 10001`) || !strings.Contains(out, `"anchor_lag": 0`) {
		t.Errorf("store status: %s", out)
	}
	// Artifacts, byte for byte, and the pins, grants, trust records and
	// jobs, read back from PostgreSQL.
	pg, err := postgres.Open(ctx, f.app, &postgres.Options{AnchorDir: t.TempDir(), Host: "reader"})
	must(err)
	defer pg.Close()
	for d, data := range artifacts {
		got, err := pg.Artifact(ctx, d)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("artifact %s in the copy: %d bytes, %v; want the %d bytes of the source", d, len(got), err, len(data))
		}
	}
	dst := map[string]func(context.Context) (map[string]json.RawMessage, error){
		"pins": pg.ListPins, "grants": pg.ListGrants, "trust records": pg.ListTrust, "jobs": pg.ListJobs,
	}
	for _, d := range docs {
		got, err := dst[d.what](ctx)
		must(err)
		if len(got) != len(d.src) {
			t.Errorf("%s: %d in the copy, want %d", d.what, len(got), len(d.src))
		}
		for name, doc := range d.src {
			if !jsonEqualBytes(got[name], doc) {
				t.Errorf("%s %s in the copy: %s, want %s", d.what, name, got[name], doc)
			}
		}
	}
	// A second copy into the same store is refused: its log is not empty.
	if out, err := h.command("store", "copy", "--from", "bbolt:"+src).CombinedOutput(); err == nil || !strings.Contains(string(out), "already holds 10001 records") {
		t.Errorf("a second copy: %v\n%s", err, out)
	}
}

// daemon starts `warden daemon` on h.
func (h *fleetHost) daemon(args ...string) (*exec.Cmd, *bytes.Buffer) {
	h.f.t.Helper()
	cmd := h.command(append([]string{"daemon", "--poll", "200ms"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		h.f.t.Fatal(err)
	}
	h.f.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out
}

func (h *fleetHost) job(id string) schedule.Job {
	h.f.t.Helper()
	var j schedule.Job
	if err := json.Unmarshal([]byte(h.run("schedule", "show", id, "--json")), &j); err != nil {
		h.f.t.Fatal(err)
	}
	return j
}

// firings reads the job's firings from the database.
func (f *fleet) firings(job string) []postgres.Firing {
	f.t.Helper()
	s, err := postgres.Open(context.Background(), f.admin, &postgres.Options{AnchorDir: filepath.Join(f.dir, "admin", "anchors"), Host: "admin"})
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	fs, err := s.Firings(context.Background(), job)
	if err != nil {
		f.t.Fatal(err)
	}
	return fs
}

const fleetPolicy = `version: 1
grants: ["fs.read:**", "fs.write:out/**", "exec:sleep", "system.info"]
rules:
  - {tool: shell, action: allow}
`

// TestFleetDaemons: two daemons on two hosts share one job queue; a job
// firing every second runs exactly once per firing — over 20 firings, no
// firing run twice, none missed, each run recorded once.
func TestFleetDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two daemons for 20 seconds")
	}
	f := newFleet(t)
	a, b := f.host("host-a"), f.host("host-b")
	for _, h := range []*fleetHost{a, b} {
		if err := os.WriteFile(filepath.Join(h.home, "policy.yaml"), []byte(fleetPolicy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wf := a.write("tick.yaml", `version: 1
name: tick
grants: ["fs.read:**", "fs.write:out/**"]
steps:
  - {id: w, tool: fs_write, args: {path: out/tick.txt, content: "tick\n", overwrite: true}}
`)
	a.run("schedule", "add", "tick", "--workflow", wf, "--every", "1s", "--yes")
	da, _ := a.daemon()
	db, _ := b.daemon()
	const want = 20
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done := 0
		for _, fr := range f.firings("tick") {
			if fr.State == "done" {
				done++
			}
		}
		if done >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d firings done in two minutes", done)
		}
		time.Sleep(200 * time.Millisecond)
	}
	da.Process.Signal(syscall.SIGTERM)
	db.Process.Signal(syscall.SIGTERM)
	da.Wait()
	db.Wait()

	firings := f.firings("tick")
	holders := map[string]int{}
	var prev time.Time
	done, gaps := 0, 0
	for _, fr := range firings {
		if fr.State != "done" {
			continue
		}
		done++
		holders[strings.Fields(fr.Holder)[0]]++
		if fr.Attempt != 1 {
			t.Errorf("firing %s: attempt %d", fr.Fire, fr.Attempt)
		}
		// Firings are one second apart; one skipped (and recorded) because
		// the previous run was still going, on a loaded machine, leaves a
		// gap the job's skip count must account for.
		if d := fr.Fire.Sub(prev); !prev.IsZero() && (d < time.Second || d%time.Second != 0) {
			t.Errorf("firings %s and %s are not whole seconds apart: a firing was run twice", prev, fr.Fire)
		} else if !prev.IsZero() {
			gaps += int(d/time.Second) - 1
		}
		prev = fr.Fire
	}
	// Each firing's run is on the log once: one fs_write result per run,
	// one run per firing.
	var recs []store.AuditRecord
	if err := json.Unmarshal([]byte(a.run("audit", "ls", "--tool", "fs_write", "--json")), &recs); err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range recs {
		var ev gate.AuditEvent
		json.Unmarshal(r.Event, &ev)
		if ev.Phase == gate.PhaseResult && ev.Outcome == "ok" && ev.Principal[0] == "schedule:tick" {
			runs[ev.RunID]++
		}
	}
	j := a.job("tick")
	if len(runs) != done || j.Runs != done || j.Skipped != gaps {
		t.Errorf("%d firings done, %d runs on the log, the job counts %d runs and %d skipped", done, len(runs), j.Runs, j.Skipped)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("run %s wrote %d times", id, n)
		}
	}
	t.Logf("%d firings: %v", done, holders)
	if out := b.run("audit", "verify"); !strings.Contains(out, "audit log OK") {
		t.Errorf("audit verify: %s", out)
	}
}

// TestFleetTakeover: the daemon running a job is killed (SIGKILL); the
// other host's daemon runs the firing again once the lease expires, and
// the run record says so.
func TestFleetTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a lease to expire")
	}
	f := newFleet(t)
	a, b := f.host("host-a"), f.host("host-b")
	for _, h := range []*fleetHost{a, b} {
		if err := os.WriteFile(filepath.Join(h.home, "policy.yaml"), []byte(fleetPolicy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	marker := fmt.Sprint(2 + os.Getpid()%7)
	wf := a.write("nap.yaml", `version: 1
name: nap
grants: ["fs.read:**", "exec:sleep", "fs.write:out/**"]
steps:
  - {id: nap, tool: shell, args: {command: "sleep `+marker+`.25", timeout_ms: 600000}}
  - {id: after, tool: fs_write, args: {path: out/after.txt, content: "x", overwrite: true}}
`)
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	a.run("schedule", "add", "nap", "--workflow", wf, "--at", at, "--yes")
	da, _ := a.daemon("--lease", "2s")
	deadline := time.Now().Add(time.Minute)
	var runA string
	for {
		if j := a.job("nap"); j.Running != nil && j.Running.Host == "host-a" {
			runA = j.Running.RunID
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("host-a did not start the job")
		}
		time.Sleep(100 * time.Millisecond)
	}
	db, outB := b.daemon("--lease", "2s")
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	da.Process.Kill()
	da.Wait()
	killSleeps("sleep\x00" + marker + ".25")
	deadline = time.Now().Add(time.Minute)
	var j schedule.Job
	for {
		j = b.job("nap")
		if j.Last != nil && j.Running == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host-b did not finish the job: %+v\n%s", j, outB)
		}
		time.Sleep(200 * time.Millisecond)
	}
	db.Process.Signal(syscall.SIGTERM)
	db.Wait()
	if j.Last.Status != gate.RunSucceeded || j.Last.Attempt != 2 || j.Last.Retry == nil || j.Last.Retry.RunID != runA ||
		j.Last.Retry.Host != "host-a" || !strings.Contains(j.Last.Retry.Reason, "lease expired") || j.Runs != 1 {
		t.Fatalf("the job after the takeover: runs %d, last %+v retry %+v", j.Runs, j.Last, j.Last.Retry)
	}
	if took := j.Last.Started.Sub(killed); took < time.Second {
		t.Errorf("host-b started %v after host-a was killed: before its lease could expire", took)
	}
	// The run records: host-a's interrupted, saying why; host-b's naming
	// the run it took over.
	if s := b.run("runs", "show", runA); !strings.Contains(s, "interrupted") || !strings.Contains(s, "lease expired") {
		t.Errorf("runs show %s (host-a's):\n%s", runA, s)
	}
	if s := b.run("runs", "show", j.Last.RunID, "--json"); !strings.Contains(s, `"attempt": 2`) || !strings.Contains(s, runA) {
		t.Errorf("runs show %s (host-b's):\n%s", j.Last.RunID, s)
	}
	fs := f.firings("nap")
	if len(fs) != 1 || fs[0].Attempt != 2 || !strings.HasPrefix(fs[0].Holder, "host-b ") || fs[0].State != "done" {
		t.Errorf("firings: %+v", fs)
	}
	if _, err := os.Stat(filepath.Join(a.ws, "out", "after.txt")); err != nil {
		t.Errorf("the job's second step did not run: %v", err)
	}
}

// killSleeps kills the processes whose command line contains marker (a
// sandboxed program can outlive a SIGKILLed warden).
func killSleeps(marker string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(marker)) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestFleetPublish: a module approved on one host runs on another, which
// fetches the approved bytes from the store (and drops them when the
// module is removed); a published policy becomes every host's home
// policy, except on a host whose own was edited there, which says so.
func TestFleetPublish(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a wasm guest")
	}
	f := newFleet(t)
	a, b := f.host("host-a"), f.host("host-b")
	mod := wasmfixture.Stage(t, "examples/textstats", "", false)
	a.run("tool", "install", mod)
	// Bytes changed in the database (by whoever can write there) are never
	// written into a home, let alone run: they do not hash to the pin.
	ctx := context.Background()
	wasmBytes, err := os.ReadFile(mod)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasmBytes)
	admin, err := pgx.Connect(ctx, f.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var chunk []byte
	if err := admin.QueryRow(ctx, `SELECT data FROM warden.artifact_chunks WHERE digest = $1 AND n = 0`, sum[:]).Scan(&chunk); err != nil {
		t.Fatal(err)
	}
	altered := bytes.Clone(chunk)
	altered[100] ^= 0xff
	if _, err := admin.Exec(ctx, `UPDATE warden.artifact_chunks SET data = $2 WHERE digest = $1 AND n = 0`, sum[:], altered); err != nil {
		t.Fatal(err)
	}
	c := f.host("host-c")
	if out, err := c.command("call", "textstats", "--args", `{"text":"x"}`).CombinedOutput(); err == nil || strings.Contains(string(out), `"words"`) {
		t.Errorf("host-c ran a module whose published bytes were altered: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(c.home, "tools", "textstats.wasm")); err == nil {
		t.Error("host-c wrote the altered bytes into its home")
	}
	if _, err := admin.Exec(ctx, `UPDATE warden.artifact_chunks SET data = $2 WHERE digest = $1 AND n = 0`, sum[:], chunk); err != nil {
		t.Fatal(err)
	}
	out := b.run("call", "textstats", "--args", `{"text":"One fish. Two fish."}`)
	if !strings.Contains(out, `"words": 4`) {
		t.Fatalf("host-b calling the module host-a approved:\n%s", out)
	}
	if sum, _ := env.FileSHA256(filepath.Join(b.home, "tools", "textstats.wasm")); sum == "" {
		t.Fatal("host-b has no textstats.wasm")
	}
	// A file changed on host-b is refused, as on any host: the pin holds.
	p := filepath.Join(b.home, "tools", "textstats.wasm")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, append(data, 0, 3, 1, 'x', 'y'), 0o600)
	if out, err := b.command("call", "textstats", "--args", `{"text":"x"}`).CombinedOutput(); err == nil || !strings.Contains(string(out), "changed") {
		t.Errorf("a module edited on host-b: %v\n%s", err, out)
	}
	os.WriteFile(p, data, 0o600)
	a.run("tool", "rm", "textstats")
	b.run("tools")
	if _, err := os.Stat(filepath.Join(b.home, "tools", "textstats.wasm")); err == nil {
		t.Error("host-b kept the module host-a removed")
	}

	if err := os.WriteFile(filepath.Join(a.home, "policy.yaml"), []byte(fleetPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := a.run("policy", "publish"); !strings.Contains(out, "published") {
		t.Fatalf("policy publish: %s", out)
	}
	b.run("tools")
	if got, _ := os.ReadFile(filepath.Join(b.home, "policy.yaml")); string(got) != fleetPolicy {
		t.Errorf("host-b's policy after the publish: %q", got)
	}
	// host-b's owner edits it there; a new publish does not overwrite it,
	// and every command says so.
	os.WriteFile(filepath.Join(b.home, "policy.yaml"), []byte("version: 1\ngrants: [\"fs.read:**\"]\n"), 0o600)
	os.WriteFile(filepath.Join(a.home, "policy.yaml"), []byte(fleetPolicy+"# v2\n"), 0o600)
	a.run("policy", "publish")
	if out := b.run("tools"); !strings.Contains(out, "differs from the policy published to the fleet") {
		t.Errorf("host-b with its own policy:\n%s", out)
	}
	if got, _ := os.ReadFile(filepath.Join(b.home, "policy.yaml")); !strings.Contains(string(got), `["fs.read:**"]`) {
		t.Errorf("host-b's own policy was overwritten: %q", got)
	}
	if out := a.run("audit", "ls", "--tool", "policy.publish"); strings.Count(out, "policy.publish") != 2 {
		t.Errorf("the publishes on the log:\n%s", out)
	}
}

// listening waits until n connections to the fleet's database LISTEN for
// changes (a daemon's or mcp serve's Watch).
func (f *fleet) listening(n int) {
	f.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.admin)
	if err != nil {
		f.t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND query = 'LISTEN warden_changes'`, f.db).Scan(&got); err != nil {
			f.t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d connections LISTEN after 30 s, want %d", got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFleetLiveReload: a daemon running on host-b takes what host-a
// publishes — a policy, an approved module, the module's removal — as it
// happens (LISTEN/NOTIFY), with no command run on host-b.
func TestFleetLiveReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a wasm guest")
	}
	f := newFleet(t)
	a, b := f.host("host-a"), f.host("host-b")
	mod := wasmfixture.Stage(t, "examples/textstats", "", false)
	modSum, err := env.FileSHA256(mod)
	if err != nil {
		t.Fatal(err)
	}
	db, outB := b.daemon()
	f.listening(1)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				db.Process.Kill()
				db.Wait()
				t.Fatalf("host-b's daemon: no %s within 30 s\n%s", what, outB)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	bPolicy := filepath.Join(b.home, "policy.yaml")
	bModule := filepath.Join(b.home, "tools", "textstats.wasm")
	for _, p := range []string{bPolicy, bModule} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s before anything was published: %v", p, err)
		}
	}

	if err := os.WriteFile(filepath.Join(a.home, "policy.yaml"), []byte(fleetPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	a.run("policy", "publish")
	waitFor("policy.yaml", func() bool {
		got, _ := os.ReadFile(bPolicy)
		return string(got) == fleetPolicy
	})
	// A second publish replaces the one host-b wrote from the store.
	v2 := fleetPolicy + "# v2\n"
	if err := os.WriteFile(filepath.Join(a.home, "policy.yaml"), []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	a.run("policy", "publish")
	waitFor("policy.yaml v2", func() bool {
		got, _ := os.ReadFile(bPolicy)
		return string(got) == v2
	})

	a.run("tool", "install", mod)
	waitFor("tools/textstats.wasm", func() bool {
		sum, _ := env.FileSHA256(bModule)
		return sum == modSum
	})
	a.run("tool", "rm", "textstats")
	waitFor("removal of tools/textstats.wasm", func() bool {
		_, err := os.Stat(bModule)
		return os.IsNotExist(err)
	})

	db.Process.Signal(syscall.SIGTERM)
	if err := db.Wait(); err != nil {
		t.Errorf("host-b's daemon: %v\n%s", err, outB)
	}
}

// TestStoreSchemaErrors: a database without warden's schema, or with an
// older or a newer one, is STORE_UNAVAILABLE saying what is wrong, and
// once what to do about it — the right thing for each.
func TestStoreSchemaErrors(t *testing.T) {
	srv := pgtest.Shared(t, pgtest.Config{})
	url := srv.URL(srv.Database(t))
	check := func(what, problem, hint string, migrates int) {
		t.Helper()
		code, _, stderr := runCLI(t, t.TempDir(), "--store", url, "store", "status")
		if code != env.ExitFailed || !strings.Contains(stderr, "STORE_UNAVAILABLE: postgres: ") ||
			!strings.Contains(stderr, problem+" — "+hint) || strings.Count(stderr, "warden store migrate") != migrates {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d, STORE_UNAVAILABLE, %q — %q, `warden store migrate` %d times",
				what, code, stderr, env.ExitFailed, problem, hint, migrates)
		}
	}
	check("no schema", "has no warden schema", "create it with `warden store migrate", 1)
	ctx := context.Background()
	if _, err := postgres.Migrate(ctx, url, nil); err != nil {
		t.Fatal(err)
	}
	if err := execURL(ctx, url, fmt.Sprintf(`DELETE FROM warden.schema_migrations WHERE version = %d`, postgres.SchemaVersion)); err != nil {
		t.Fatal(err)
	}
	check("an older schema", fmt.Sprintf("has schema version %d, this warden needs %d", postgres.SchemaVersion-1, postgres.SchemaVersion),
		"upgrade it with `warden store migrate", 1)
	if err := execURL(ctx, url, fmt.Sprintf(`INSERT INTO warden.schema_migrations (version, description) VALUES (%d, 'from a newer warden')`, postgres.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	check("a newer schema", fmt.Sprintf("has schema version %d, newer than this warden's %d", postgres.SchemaVersion+1, postgres.SchemaVersion),
		"upgrade warden", 0)
}

// TestStoreUnavailable: a store server nobody answers at is
// STORE_UNAVAILABLE with a hint and exit 75, quickly, and the URL's
// password is never printed.
func TestStoreUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	home := t.TempDir()
	t0 := time.Now()
	code, _, stderr := runCLI(t, home, "--store", "postgres://warden:pw-s3cret-9@"+addr+"/warden", "call", "system", "--args", `{"operation":"get_info"}`)
	if code != env.ExitLocked || !strings.Contains(stderr, "STORE_UNAVAILABLE") || !strings.Contains(stderr, "check that the database server is running") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	if strings.Contains(stderr, "pw-s3cret-9") {
		t.Errorf("the password was printed: %s", stderr)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if code, _, stderr := runCLI(t, home, "--store", "mysql://x", "store", "status"); code != env.ExitUsage || !strings.Contains(stderr, "unknown store") {
		t.Errorf("--store mysql://x: exit %d, %s", code, stderr)
	}
}
