package env

import "os"

// envWASIOutput, when set, makes the Extism SDK send a guest's stdout and
// stderr to the host's terminal; warden's engine refuses to run guests
// while it is set, so main unsets it before anything runs.
const envWASIOutput = "EXTISM_ENABLE_WASI_OUTPUT"

// wasiOutputIgnored records that main unset EXTISM_ENABLE_WASI_OUTPUT, so
// the command's log can say so.
var wasiOutputIgnored bool

// unsetWASIOutput removes EXTISM_ENABLE_WASI_OUTPUT from the environment
// and reports whether it was set.
func unsetWASIOutput() bool {
	if _, set := os.LookupEnv(envWASIOutput); !set {
		return false
	}
	os.Unsetenv(envWASIOutput)
	return true
}

// IgnoreWASIOutput unsets EXTISM_ENABLE_WASI_OUTPUT, remembering whether
// it was set so that each command's log says it was ignored. main calls
// it before anything runs.
func IgnoreWASIOutput() { wasiOutputIgnored = unsetWASIOutput() }
