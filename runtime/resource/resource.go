// Package resource holds the resource limits of the programs warden starts
// (CPU time, address space, open files, processes, file size): a policy
// sets them, a call carries them, the sandbox applies them. It has no
// dependencies and no side effects, so the tool contract can name them
// without pulling in the sandbox.
package resource

// Limits are the resource limits of one program (and, for processes, of
// what it starts). Zero means the default; see Default.
type Limits struct {
	CPUSeconds     uint64 `json:"cpu_seconds,omitempty" yaml:"cpu_seconds"`
	AddressSpaceMB uint64 `json:"address_space_mb,omitempty" yaml:"address_space_mb"`
	OpenFiles      uint64 `json:"open_files,omitempty" yaml:"open_files"`
	Processes      uint64 `json:"processes,omitempty" yaml:"processes"`
	FileSizeMB     uint64 `json:"file_size_mb,omitempty" yaml:"file_size_mb"`
}

// Default applies where a policy rule says nothing: generous for
// builds and tests, tight enough to stop a runaway.
var Default = Limits{
	CPUSeconds:     300,
	AddressSpaceMB: 16 << 10,
	OpenFiles:      4096,
	Processes:      512,
	FileSizeMB:     4 << 10,
}

// WithDefaults fills the zero fields from Default.
func (l Limits) WithDefaults() Limits { return l.Over(Default) }

// Over returns l with its zero fields taken from base.
func (l Limits) Over(base Limits) Limits {
	pick := func(v, b uint64) uint64 {
		if v != 0 {
			return v
		}
		return b
	}
	return Limits{
		CPUSeconds:     pick(l.CPUSeconds, base.CPUSeconds),
		AddressSpaceMB: pick(l.AddressSpaceMB, base.AddressSpaceMB),
		OpenFiles:      pick(l.OpenFiles, base.OpenFiles),
		Processes:      pick(l.Processes, base.Processes),
		FileSizeMB:     pick(l.FileSizeMB, base.FileSizeMB),
	}
}
