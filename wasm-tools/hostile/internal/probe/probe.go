// Package probe tries everything a guest with ambient authority could do
// and reports what worked. The wasiprobe fixtures (Extism plugin and WASI
// command) run it; a host test asserts that Report.Could is empty, that the
// markers written to stdout/stderr never reach the host's terminal, and that
// the clock and randomness are real.
package probe

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"time"
)

// Markers the probe writes to stdout and stderr; a host test looks for them
// on its terminal (they must not be there) and in warden's log.
const (
	StdoutMarker = "WASIPROBE-STDOUT-MARKER"
	StderrMarker = "WASIPROBE-STDERR-MARKER"
)

// Attempt is the outcome of one probe.
type Attempt struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Detail is what the probe saw when it worked (a count, a value).
	Detail string `json:"detail,omitempty"`
}

// Report is the probe's result.
type Report struct {
	ReadPasswd  Attempt  `json:"read_passwd"`
	ReadDirRoot Attempt  `json:"read_dir_root"`
	ReadDirCwd  Attempt  `json:"read_dir_cwd"`
	WriteTmp    Attempt  `json:"write_tmp"`
	Getwd       Attempt  `json:"getwd"`
	EnvHome     Attempt  `json:"getenv_home"`
	EnvPath     Attempt  `json:"getenv_path"`
	Environ     []string `json:"environ"`
	Args        []string `json:"args"`
	NetDial     Attempt  `json:"net_dial"`
	NetLookup   Attempt  `json:"net_lookup"`
	// StdoutWrite and StderrWrite say whether the writes returned no error;
	// that is not a capability (the host may accept and capture them), so
	// they are not in Could. The terminal check is the host test's.
	StdoutWrite Attempt `json:"stdout_write"`
	StderrWrite Attempt `json:"stderr_write"`
	// ClockUnixNano holds two readings of the wall clock; a real clock is
	// plausible (after 2024) and advances.
	ClockUnixNano  [2]int64 `json:"clock_unix_nano"`
	ClockPlausible bool     `json:"clock_plausible"`
	ClockAdvances  bool     `json:"clock_advances"`
	// Random holds two 16-byte reads of crypto/rand, hex; real randomness
	// differs between the reads and between instances.
	Random        [2]string `json:"random"`
	RandomDiffers bool      `json:"random_differs"`
	// Could names every probe above that worked and should not have:
	// files, directories, environment, arguments beyond argv[0], network.
	Could []string `json:"could"`
}

func attempt(err error, detail string) Attempt {
	if err != nil {
		return Attempt{Error: err.Error()}
	}
	return Attempt{OK: true, Detail: detail}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// Run runs every probe.
func Run() Report {
	var r Report
	t0 := time.Now()

	b, err := os.ReadFile("/etc/passwd")
	r.ReadPasswd = attempt(err, itoa(len(b))+" bytes")
	ents, err := os.ReadDir("/")
	r.ReadDirRoot = attempt(err, itoa(len(ents))+" entries")
	ents, err = os.ReadDir(".")
	r.ReadDirCwd = attempt(err, itoa(len(ents))+" entries")
	const tmp = "/tmp/wasiprobe-was-here"
	err = os.WriteFile(tmp, []byte("x"), 0o600)
	r.WriteTmp = attempt(err, tmp)
	if err == nil {
		_ = os.Remove(tmp)
	}
	wd, err := os.Getwd()
	r.Getwd = attempt(err, wd)
	if err == nil && (wd == "" || wd == "/") {
		// Go reports "/" with no preopens; that is not a capability.
		r.Getwd.OK = false
	}

	if v, ok := os.LookupEnv("HOME"); ok {
		r.EnvHome = Attempt{OK: true, Detail: v}
	}
	if v, ok := os.LookupEnv("PATH"); ok {
		r.EnvPath = Attempt{OK: true, Detail: v}
	}
	r.Environ = append([]string{}, os.Environ()...)
	r.Args = append([]string{}, os.Args...)

	c, err := net.Dial("tcp", "127.0.0.1:80")
	if err == nil {
		c.Close()
	}
	r.NetDial = attempt(err, "127.0.0.1:80")
	addrs, err := net.LookupHost("localhost")
	if err == nil && len(addrs) == 0 {
		err = errEmpty
	}
	r.NetLookup = attempt(err, itoa(len(addrs))+" addresses")

	_, err = os.Stdout.WriteString(StdoutMarker + "\n")
	r.StdoutWrite = attempt(err, "")
	_, err = os.Stderr.WriteString(StderrMarker + "\n")
	r.StderrWrite = attempt(err, "")

	var rnd [2][16]byte
	for i := range rnd {
		if _, err := rand.Read(rnd[i][:]); err != nil {
			r.Random[i] = "error: " + err.Error()
			continue
		}
		r.Random[i] = hex.EncodeToString(rnd[i][:])
	}
	r.RandomDiffers = r.Random[0] != r.Random[1]

	t1 := time.Now()
	r.ClockUnixNano = [2]int64{t0.UnixNano(), t1.UnixNano()}
	r.ClockPlausible = t0.Year() >= 2024
	r.ClockAdvances = t1.UnixNano() > t0.UnixNano()

	r.Could = []string{}
	for _, p := range []struct {
		name string
		ok   bool
	}{
		{"read_passwd", r.ReadPasswd.OK},
		{"read_dir_root", r.ReadDirRoot.OK},
		{"read_dir_cwd", r.ReadDirCwd.OK},
		{"write_tmp", r.WriteTmp.OK},
		{"getwd", r.Getwd.OK},
		{"getenv_home", r.EnvHome.OK},
		{"getenv_path", r.EnvPath.OK},
		{"environ", len(r.Environ) > 0},
		{"args", len(r.Args) > 1},
		{"net_dial", r.NetDial.OK},
		{"net_lookup", r.NetLookup.OK},
	} {
		if p.ok {
			r.Could = append(r.Could, p.name)
		}
	}
	return r
}

type errString string

func (e errString) Error() string { return string(e) }

const errEmpty = errString("no addresses")
