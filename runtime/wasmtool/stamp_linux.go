//go:build linux

package wasmtool

import (
	"io/fs"
	"syscall"
)

// stampOf is fi's stamp (see fileStamp); false when fi says too little.
func stampOf(fi fs.FileInfo) (fileStamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	return fileStamp{
		Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size,
		MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(),
	}, true
}
