package ops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// ---- read_logs ------------------------------------------------------------

type readLogs struct{ o *Config }

// readLogsArgs are read_logs' arguments. The unit's pattern is
// unitPattern's (TestOpsUnitSchemaPattern).
type readLogsArgs struct {
	Unit     string `json:"unit" minLength:"1" maxLength:"255" pattern:"^[A-Za-z0-9_][A-Za-z0-9:_.@\\\\-]*$" jsonschema:"systemd unit whose journal to read, e.g. \"nginx.service\" or \"nginx\" (\".service\" is added when no unit type is given)"`
	Lines    *int   `json:"lines,omitempty" minimum:"1" maximum:"5000" jsonschema:"how many of the most recent entries to return (default 100, at most 5000)"`
	Since    string `json:"since,omitempty" minLength:"1" maxLength:"64" pattern:"^[0-9A-Za-z+-][0-9A-Za-z :.+-]*$" jsonschema:"only entries at or after this time, in journalctl's syntax: \"2024-05-01 10:00:00\", \"yesterday\", \"-1h\", \"1 hour ago\""`
	Priority string `json:"priority,omitempty" enum:"emerg,alert,crit,err,warning,notice,info,debug,0,1,2,3,4,5,6,7" jsonschema:"only entries of this priority or more severe (emerg=0 … debug=7)"`
}

// Logs is read_logs' data.
type Logs struct {
	Unit    string     `json:"unit"`
	Argv    []string   `json:"argv"`
	Entries []LogEntry `json:"entries"`
	Count   int        `json:"count"`
	// Truncated is set when journalctl printed more than warden keeps; the
	// entries are the first complete ones.
	Truncated bool `json:"truncated"`
	// Skipped counts output lines that were not journal JSON.
	Skipped int `json:"skipped"`
}

// LogEntry is one journal entry.
type LogEntry struct {
	Time         string `json:"time"` // RFC 3339, UTC, microseconds
	Priority     *int   `json:"priority"`
	PriorityName string `json:"priority_name,omitempty"`
	Unit         string `json:"unit,omitempty"`
	Identifier   string `json:"identifier,omitempty"`
	PID          int    `json:"pid,omitempty"`
	Hostname     string `json:"hostname,omitempty"`
	Message      string `json:"message"`
	Cursor       string `json:"cursor,omitempty"`
}

var priorityNames = []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

func (t *readLogs) Spec() tool.Spec {
	return tool.Spec{
		Name: "read_logs",
		Description: "Read the most recent journald entries of a systemd unit (journalctl --output=json, parsed): " +
			"time, priority, unit, identifier, pid and message of each entry, oldest first. Optional since and priority filters. Needs exec:journalctl.",
		Capabilities: []capability.Kind{capability.Exec},
		ReadOnly:     true,
	}
}

// check validates the arguments and returns the full unit name and the
// number of lines to read.
func (t *readLogs) check(a *readLogsArgs) (string, int, *tool.Error) {
	unit, uerr := opsUnit(a.Unit)
	if uerr != nil {
		return "", 0, uerr
	}
	lines := defaultLines
	if a.Lines != nil {
		lines = *a.Lines
	}
	if lines < 1 || lines > maxLines {
		return "", 0, tool.Errorf(tool.CodeInvalidInput, "ask for 1 to 5000 lines", "lines %d is out of range", lines)
	}
	return unit, lines, nil
}

func (t *readLogs) Needs(c *tool.Call, a *readLogsArgs) ([]capability.Need, error) {
	if _, _, err := t.check(a); err != nil {
		return nil, err
	}
	return []capability.Need{{Kind: capability.Exec, Resource: "journalctl"}}, nil
}

func (t *readLogs) Run(ctx context.Context, c *tool.Call, a *readLogsArgs) tool.Outcome {
	unit, lines, berr := t.check(a)
	if berr != nil {
		return tool.Outcome{Err: berr}
	}
	args := []string{"--no-pager", "--output=json", "--lines=" + strconv.Itoa(lines)}
	if a.Since != "" {
		args = append(args, "--since="+a.Since)
	}
	if a.Priority != "" {
		args = append(args, "--priority="+a.Priority)
	}
	args = append(args, "--unit="+unit)
	argv, err := t.o.argv("journalctl", args...)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	p, err := t.o.run(ctx, c, argv)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	if p.ExitCode != 0 {
		return tool.Outcome{Err: p.failed()}
	}
	var warnings []string
	data := Logs{Unit: unit, Argv: argv, Entries: []LogEntry{}, Truncated: p.Stdout.Truncated()}
	out := p.Stdout.Bytes() // what was kept, without the truncation marker
	if data.Truncated {
		if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
			out = out[:i+1]
		} else {
			out = nil
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), maxStdout)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		e, ok := parseJournal(line)
		if !ok {
			data.Skipped++
			continue
		}
		data.Entries = append(data.Entries, e)
	}
	if n := len(data.Entries); n > lines {
		// journalctl printed more than asked for: keep the most recent.
		warnings = append(warnings, fmt.Sprintf("journalctl printed %d entries for %d lines asked; the %d most recent are shown", n, lines, lines))
		data.Entries = data.Entries[n-lines:]
		data.Truncated = true
	}
	data.Count = len(data.Entries)
	if p.Stdout.Truncated() {
		warnings = append(warnings, fmt.Sprintf("journalctl printed more than %d MiB; only the %d complete entries before the cut are shown: ask for fewer lines", maxStdout>>20, data.Count))
	}
	if data.Skipped > 0 {
		warnings = append(warnings, fmt.Sprintf("%s of journalctl's output skipped: not journal JSON", plural(data.Skipped, "line", "lines")))
	}
	if s := p.stderrText(); s != "" {
		warnings = append(warnings, "journalctl: "+s)
	}
	if data.Count == 0 {
		warnings = append(warnings, fmt.Sprintf("no journal entries for %s: check the unit name with service_status, or widen since/priority", unit))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%s from the journal of %s\n", plural(data.Count, "entry", "entries"), unit)
	for _, e := range data.Entries {
		who := e.Identifier
		if who == "" {
			who = e.Unit
		}
		if e.PID != 0 {
			who += "[" + strconv.Itoa(e.PID) + "]"
		}
		prio := ""
		if e.PriorityName != "" {
			prio = " <" + e.PriorityName + ">"
		}
		fmt.Fprintf(&b, "%s %s%s: %s\n", e.Time, who, prio, e.Message)
	}
	return tool.Outcome{Output: b.String(), Data: data, Warnings: warnings}
}

// parseJournal decodes one line of journalctl --output=json. Every field
// is a string, an array of byte values (binary or non-UTF-8 data), an array
// of those (a field that occurs several times) or null (a value too large
// to show).
func parseJournal(line []byte) (LogEntry, bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil || raw == nil {
		return LogEntry{}, false
	}
	f := func(k string) string { return journalField(raw[k]) }
	e := LogEntry{
		Unit:       f("_SYSTEMD_UNIT"),
		Identifier: f("SYSLOG_IDENTIFIER"),
		Hostname:   f("_HOSTNAME"),
		Cursor:     f("__CURSOR"),
	}
	if e.Unit == "" {
		e.Unit = f("UNIT") // messages systemd itself logs about the unit
	}
	if msg, ok := raw["MESSAGE"]; ok && string(msg) == "null" {
		e.Message = "[message too large; not shown by journalctl]"
	} else {
		e.Message = f("MESSAGE")
	}
	if us, err := strconv.ParseInt(f("__REALTIME_TIMESTAMP"), 10, 64); err == nil {
		e.Time = time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	}
	if p, err := strconv.Atoi(f("PRIORITY")); err == nil && p >= 0 && p < len(priorityNames) {
		e.Priority = &p
		e.PriorityName = priorityNames[p]
	}
	pid := f("_PID")
	if pid == "" {
		pid = f("SYSLOG_PID")
	}
	e.PID, _ = strconv.Atoi(pid)
	return e, true
}

func journalField(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var bs []byte
	var nums []int
	if json.Unmarshal(v, &nums) == nil {
		for _, n := range nums {
			bs = append(bs, byte(n))
		}
		return strings.ToValidUTF8(string(bs), string(utf8.RuneError))
	}
	var many []json.RawMessage
	if json.Unmarshal(v, &many) == nil && len(many) > 0 {
		return journalField(many[0])
	}
	return ""
}

// ---- service_status -------------------------------------------------------

// unitArgs is the argument of the service tools: the unit, called service
// in the catalogue (either name is accepted, not both: refineUnitSchema).
// The pattern is unitPattern's (TestOpsUnitSchemaPattern).
type unitArgs struct {
	Unit    string `json:"unit,omitempty" minLength:"1" maxLength:"255" pattern:"^[A-Za-z0-9_][A-Za-z0-9:_.@\\\\-]*$"`
	Service string `json:"service,omitempty" minLength:"1" maxLength:"255" pattern:"^[A-Za-z0-9_][A-Za-z0-9:_.@\\\\-]*$" jsonschema:"the seed's name for unit; give unit or service, not both"`
}

// refineUnitSchema says what the tags of unitArgs cannot: the unit's
// description, which names what the tool does with it, and that exactly
// one of unit and service is given (oneOf).
func refineUnitSchema(s *jsonschema.Schema, what string) {
	s.Properties["unit"].Description = "the systemd unit " + what +
		`, e.g. "nginx.service" or "nginx" (".service" is added when no unit type is given)`
	s.OneOf = []*jsonschema.Schema{{Required: []string{"unit"}}, {Required: []string{"service"}}}
}

// unitName validates the unit the arguments name and returns it in full.
func unitName(a *unitArgs) (string, *tool.Error) {
	name := a.Unit
	switch {
	case a.Unit != "" && a.Service != "":
		return "", tool.Errorf(tool.CodeInvalidInput, "give unit or service, not both", "both unit and service are given")
	case a.Unit == "":
		name = a.Service
	}
	return opsUnit(name)
}

// statusProps are the properties service_status asks systemctl for.
var statusProps = []string{"Id", "Description", "LoadState", "LoadError", "ActiveState", "SubState",
	"UnitFileState", "MainPID", "ExecMainStatus", "Result", "NRestarts", "ActiveEnterTimestamp",
	"StateChangeTimestamp", "MemoryCurrent", "FragmentPath"}

// ServiceStatus is service_status' data (and the before/after states of
// restart_service).
type ServiceStatus struct {
	Unit                 string  `json:"unit"`
	ID                   string  `json:"id"`
	Description          string  `json:"description"`
	LoadState            string  `json:"load_state"`
	ActiveState          string  `json:"active_state"`
	SubState             string  `json:"sub_state"`
	UnitFileState        string  `json:"unit_file_state"`
	MainPID              int     `json:"main_pid"`
	ExecMainStatus       int     `json:"exec_main_status"`
	Result               string  `json:"result"`
	NRestarts            int     `json:"n_restarts"`
	ActiveEnterTimestamp string  `json:"active_enter_timestamp"`
	StateChangeTimestamp string  `json:"state_change_timestamp"`
	MemoryCurrentBytes   *uint64 `json:"memory_current_bytes"`
	FragmentPath         string  `json:"fragment_path"`
	// Properties holds every KEY=VALUE line systemctl printed.
	Properties map[string]string `json:"properties"`
	Argv       []string          `json:"argv"`
}

// Summary is the one-line description of the state.
func (s ServiceStatus) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (%s)", s.Unit, s.ActiveState, s.SubState)
	if s.MainPID != 0 {
		fmt.Fprintf(&b, ", main pid %d", s.MainPID)
	}
	fmt.Fprintf(&b, ", %s", s.LoadState)
	if s.UnitFileState != "" {
		fmt.Fprintf(&b, " (%s)", s.UnitFileState)
	}
	if s.ActiveEnterTimestamp != "" && s.ActiveState == "active" {
		fmt.Fprintf(&b, ", active since %s", s.ActiveEnterTimestamp)
	}
	if s.Result != "" && s.Result != "success" {
		fmt.Fprintf(&b, ", last result %s", s.Result)
	}
	return b.String()
}

// status runs systemctl show for unit. A unit systemd does not know is
// NOT_FOUND.
func (o *Config) status(ctx context.Context, c *tool.Call, unit string) (ServiceStatus, *tool.Error) {
	argv, err := o.argv("systemctl", "show", "--no-pager", "--property="+strings.Join(statusProps, ","), "--", unit)
	if err != nil {
		return ServiceStatus{}, err
	}
	p, err := o.run(ctx, c, argv)
	if err != nil {
		return ServiceStatus{}, err
	}
	if p.ExitCode != 0 {
		return ServiceStatus{}, p.failed()
	}
	st := ServiceStatus{Unit: unit, Argv: argv, Properties: map[string]string{}}
	for _, line := range strings.Split(string(p.Stdout.Bytes()), "\n") {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), "=")
		if !ok || k == "" {
			continue
		}
		st.Properties[k] = v
	}
	pr := st.Properties
	st.ID, st.Description, st.LoadState = pr["Id"], pr["Description"], pr["LoadState"]
	st.ActiveState, st.SubState, st.UnitFileState = pr["ActiveState"], pr["SubState"], pr["UnitFileState"]
	st.Result, st.FragmentPath = pr["Result"], pr["FragmentPath"]
	st.ActiveEnterTimestamp, st.StateChangeTimestamp = pr["ActiveEnterTimestamp"], pr["StateChangeTimestamp"]
	st.MainPID, _ = strconv.Atoi(pr["MainPID"])
	st.ExecMainStatus, _ = strconv.Atoi(pr["ExecMainStatus"])
	st.NRestarts, _ = strconv.Atoi(pr["NRestarts"])
	if m, perr := strconv.ParseUint(pr["MemoryCurrent"], 10, 64); perr == nil && m != 1<<64-1 {
		st.MemoryCurrentBytes = &m
	}
	if st.LoadState == "" {
		return st, tool.Errorf(tool.CodeCommandFailed, "systemctl's output was not what warden expects; run systemctl show yourself",
			"systemctl show printed no LoadState for %s", unit)
	}
	if st.LoadState == "not-found" {
		return st, tool.Errorf(tool.CodeNotFound, "check the unit name: systemctl list-units --all lists them",
			"unit %s is not known to systemd", unit)
	}
	return st, nil
}

type serviceStatus struct{ o *Config }

func (t *serviceStatus) Spec() tool.Spec {
	return tool.Spec{
		Name: "service_status",
		Description: "Show a systemd unit's state (systemctl show, parsed): load, active and sub state, main PID, unit file state, " +
			"last result, restarts, memory, since when. An unknown unit is NOT_FOUND. Needs exec:systemctl.",
		Capabilities: []capability.Kind{capability.Exec},
		ReadOnly:     true,
	}
}

// RefineSchema implements tool.SchemaRefiner.
func (t *serviceStatus) RefineSchema(s *jsonschema.Schema) { refineUnitSchema(s, "to show") }

func (t *serviceStatus) Needs(c *tool.Call, a *unitArgs) ([]capability.Need, error) {
	if _, err := unitName(a); err != nil {
		return nil, err
	}
	return []capability.Need{{Kind: capability.Exec, Resource: "systemctl"}}, nil
}

func (t *serviceStatus) Run(ctx context.Context, c *tool.Call, a *unitArgs) tool.Outcome {
	unit, err := unitName(a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	st, err := t.o.status(ctx, c, unit)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	var warnings []string
	switch st.LoadState {
	case "loaded":
	case "masked":
		warnings = append(warnings, unit+" is masked: it cannot be started until it is unmasked")
	default:
		warnings = append(warnings, fmt.Sprintf("%s did not load (%s): %s", unit, st.LoadState, st.Properties["LoadError"]))
	}
	return tool.Outcome{Output: st.Summary(), Data: st, Warnings: warnings}
}

// ---- restart_service ------------------------------------------------------

type restartService struct{ o *Config }

// Restart is restart_service's data (and its preview's).
type Restart struct {
	Unit string `json:"unit"`
	// Argv is exactly what runs (or would run, in a dry run).
	Argv []string `json:"argv"`
	// Restarted is false in a dry run.
	Restarted bool          `json:"restarted"`
	Before    ServiceStatus `json:"before"`
	// After is the state once systemctl restart returned (absent in a dry run).
	After *ServiceStatus `json:"after,omitempty"`
}

func (t *restartService) Spec() tool.Spec {
	return tool.Spec{
		Name: "restart_service",
		Description: "Restart a systemd unit (systemctl restart --no-ask-password -- UNIT) and report its state before and after. " +
			"Side-effecting: the default policy requires approval and shows the dry run first (the exact argv and the current state). " +
			"Needs exec:systemctl.",
		Capabilities: []capability.Kind{capability.Exec},
	}
}

// RefineSchema implements tool.SchemaRefiner.
func (t *restartService) RefineSchema(s *jsonschema.Schema) { refineUnitSchema(s, "to restart") }

func (t *restartService) Needs(c *tool.Call, a *unitArgs) ([]capability.Need, error) {
	if _, err := unitName(a); err != nil {
		return nil, err
	}
	return []capability.Need{{Kind: capability.Exec, Resource: "systemctl"}}, nil
}

// criticalUnits are units whose restart can cut the machine off (remote
// access, the system bus, the network, logging) or stop warden itself.
var criticalUnits = []string{"ssh", "sshd", "dbus", "dbus-broker", "networkmanager", "systemd-networkd",
	"systemd-resolved", "systemd-journald", "systemd-logind", "networking", "network", "wpa_supplicant", "warden"}

func restartWarnings(unit string) []string {
	w := []string{fmt.Sprintf("restarts %s: its processes are stopped and started again, and clients may be interrupted", unit)}
	base := strings.ToLower(unit)
	if i := strings.LastIndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	if i := strings.IndexByte(base, '@'); i >= 0 {
		base = base[:i]
	}
	for _, c := range criticalUnits {
		if base == c {
			w = append(w, fmt.Sprintf("%s is critical to this machine (remote access, system bus, network, logging or warden itself): restarting it may cut you off", unit))
			break
		}
	}
	return w
}

func (t *restartService) restartArgv(unit string) ([]string, *tool.Error) {
	return t.o.argv("systemctl", "restart", "--no-ask-password", "--", unit)
}

// Preview resolves the exact argv and reads the unit's current state; it
// never runs systemctl restart.
func (t *restartService) Preview(ctx context.Context, c *tool.Call, a *unitArgs) tool.Outcome {
	unit, err := unitName(a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	argv, err := t.restartArgv(unit)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	before, err := t.o.status(ctx, c, unit)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	data := Restart{Unit: unit, Argv: argv, Before: before}
	out := fmt.Sprintf("would run: %s\ncurrent state: %s", strings.Join(quoteArgv(argv), " "), before.Summary())
	return tool.Outcome{Output: out, Data: data, Warnings: restartWarnings(unit)}
}

func (t *restartService) Run(ctx context.Context, c *tool.Call, a *unitArgs) tool.Outcome {
	unit, err := unitName(a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	argv, err := t.restartArgv(unit)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	// An unknown unit is NOT_FOUND before anything is restarted.
	before, err := t.o.status(ctx, c, unit)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	p, err := t.o.run(ctx, c, argv)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	if p.ExitCode != 0 {
		return tool.Outcome{Err: p.failed()}
	}
	data := Restart{Unit: unit, Argv: argv, Restarted: true, Before: before}
	warnings := restartWarnings(unit)
	after, aerr := t.o.status(ctx, c, unit)
	if aerr != nil {
		warnings = append(warnings, "restarted, but its state afterwards could not be read: "+aerr.Message)
	} else {
		data.After = &after
		if after.ActiveState != "active" {
			warnings = append(warnings, fmt.Sprintf("%s is %s (%s) after the restart: read its logs with read_logs", unit, after.ActiveState, after.SubState))
		}
	}
	out := fmt.Sprintf("restarted %s\nbefore: %s", unit, before.Summary())
	if data.After != nil {
		out += "\nafter:  " + data.After.Summary()
	}
	return tool.Outcome{Output: out, Data: data, Warnings: warnings}
}
