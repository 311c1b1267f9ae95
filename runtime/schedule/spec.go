// Package schedule is warden's scheduled automation: jobs (a pinned
// workflow or an agent task, with the grants they were scheduled with, a
// schedule, a missed-run policy and a timeout), when they fire, and the
// Scheduler that runs the due ones — each through the gate, as principal
// schedule:<job>, with the job's grants ∩ the policy in force when it runs.
//
// # Schedules
//
// A schedule is one of: every DURATION (firings at the job's anchor + k ×
// the interval, whatever the clocks say), a standard 5-field cron
// expression in a named time zone, or at TIME for once. Cron expressions
// are parsed by robfig/cron/v3 and evaluated on the wall clock of the
// zone: a job fires once for each wall-clock time the expression names.
// When clocks go forward, a time that does not exist that day fires at the
// moment after the gap (02:30 on a spring-forward day fires at 03:30); when
// they go back, a wall time that happens twice fires the first time only.
// A daily job therefore runs exactly once a day, as with cron itself.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest interval of an every schedule.
const MinEvery = time.Second

// Spec is a job's schedule, as given: exactly one of Every, Cron or At.
type Spec struct {
	Every string `json:"every,omitempty"` // a Go duration: 15m, 1h30m
	Cron  string `json:"cron,omitempty"`  // minute hour day-of-month month day-of-week (or @daily, @hourly, …)
	TZ    string `json:"tz,omitempty"`    // the zone of Cron and At (default UTC)
	At    string `json:"at,omitempty"`    // RFC 3339, or "2006-01-02 15:04" in TZ
}

// Schedule is a parsed Spec.
type Schedule struct {
	spec  Spec
	every time.Duration
	cron  cron.Schedule // evaluated on naive wall-clock times (UTC standing for the zone's wall clock)
	loc   *time.Location
	at    time.Time
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse checks a spec.
func Parse(s Spec) (*Schedule, error) {
	n := 0
	for _, v := range []string{s.Every, s.Cron, s.At} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("give exactly one of every, cron or at")
	}
	sc := &Schedule{spec: s, loc: time.UTC}
	if s.TZ != "" {
		loc, err := time.LoadLocation(s.TZ)
		if err != nil {
			return nil, fmt.Errorf("time zone %q: %v", s.TZ, err)
		}
		sc.loc = loc
	}
	switch {
	case s.Every != "":
		d, err := time.ParseDuration(s.Every)
		if err != nil {
			return nil, fmt.Errorf("every %q: %v", s.Every, err)
		}
		if d < MinEvery {
			return nil, fmt.Errorf("every %s: at least %s", d, MinEvery)
		}
		if s.TZ != "" {
			return nil, errors.New("tz is for cron and at schedules")
		}
		sc.every = d
	case s.Cron != "":
		if strings.Contains(s.Cron, "TZ=") {
			return nil, errors.New("cron: give the time zone with tz, not in the expression")
		}
		c, err := cronParser.Parse(s.Cron)
		if err != nil {
			return nil, fmt.Errorf("cron %q: %v", s.Cron, err)
		}
		sc.cron = c
	default:
		t, err := time.Parse(time.RFC3339, s.At)
		if err != nil {
			t, err = time.ParseInLocation("2006-01-02 15:04", s.At, sc.loc)
		}
		if err != nil {
			return nil, fmt.Errorf("at %q: use RFC 3339 (2026-11-25T09:00:00Z) or \"2026-11-25 09:00\" in tz", s.At)
		}
		sc.at = t
	}
	return sc, nil
}

// String describes the schedule.
func (sc *Schedule) String() string {
	switch {
	case sc.every > 0:
		return "every " + sc.every.String()
	case sc.cron != nil:
		return fmt.Sprintf("cron %q in %s", sc.spec.Cron, sc.loc)
	}
	return "once at " + sc.at.In(sc.loc).Format(time.RFC3339)
}

// Next returns the first firing strictly after t, for a job anchored at
// anchor (every schedules count from it); ok is false when there is none
// (an at schedule whose time has passed).
func (sc *Schedule) Next(anchor, t time.Time) (time.Time, bool) {
	switch {
	case sc.every > 0:
		if t.Before(anchor) {
			return anchor, true
		}
		k := t.Sub(anchor)/sc.every + 1
		return anchor.Add(k * sc.every), true
	case sc.cron != nil:
		return sc.nextWall(t), true
	}
	if sc.at.After(t) {
		return sc.at, true
	}
	return time.Time{}, false
}

// nextWall is the next cron firing after t on the zone's wall clock.
func (sc *Schedule) nextWall(t time.Time) time.Time {
	wall := func(t time.Time) time.Time {
		l := t.In(sc.loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
	}
	w := wall(t)
	for {
		nw := sc.cron.Next(w)
		if nw.IsZero() {
			return nw
		}
		// Back to the zone. A wall time in a spring-forward gap comes back
		// after the gap; of a wall time that happens twice, the first.
		real := time.Date(nw.Year(), nw.Month(), nw.Day(), nw.Hour(), nw.Minute(), nw.Second(), 0, sc.loc)
		if first := firstOccurrence(real, nw, sc.loc); !first.IsZero() {
			real = first
		}
		for i := 0; i < 4 && wall(real).Before(nw); i++ {
			real = real.Add(nw.Sub(wall(real))) // in a gap: move past it
		}
		if real.After(t) {
			return real
		}
		w = nw
	}
}

// firstOccurrence returns the earlier of the two instants showing wall
// time w in loc when the clocks went back over it, or zero.
func firstOccurrence(real, w time.Time, loc *time.Location) time.Time {
	for _, back := range []time.Duration{time.Hour, 30 * time.Minute} {
		e := real.Add(-back)
		l := e.In(loc)
		if l.Hour() == w.Hour() && l.Minute() == w.Minute() && l.Day() == w.Day() {
			return e
		}
	}
	return time.Time{}
}

// Firings returns the first n firings after t.
func (sc *Schedule) Firings(anchor, t time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		next, ok := sc.Next(anchor, t)
		if !ok {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

// Once reports whether the schedule fires only once (at).
func (sc *Schedule) Once() bool { return sc.every == 0 && sc.cron == nil }
