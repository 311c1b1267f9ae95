//go:build darwin

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
		Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size,
		MtimeNS: st.Mtimespec.Nano(), CtimeNS: st.Ctimespec.Nano(),
	}, true
}
