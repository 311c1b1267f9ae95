package hostfuncs

import (
	"context"
	"reflect"
	"unsafe"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"
)

// The guest's own linear memory, for the buffer path's direct mode
// (direct.go). Extism gives a host function its kernel's memory only
// (CurrentPlugin.Memory), where every word a guest reads or writes costs
// it a host call (load_u64, store_u64); the module's own memory is in the
// plugin's *extism.Module, which does not export it.

// moduleLayoutOK reports whether extism.Module is still what guestMemory
// reads it as: one field, the wazero api.Module it wraps. Checked once; if
// a go-sdk version changes the struct, the direct mode is off (warden_buffer
// refuses it, and the guest helper copies a word at a time as before).
var moduleLayoutOK = func() bool {
	t := reflect.TypeFor[extism.Module]()
	m := reflect.TypeFor[api.Module]()
	return t.Kind() == reflect.Struct && t.NumField() == 1 && t.Field(0).Type == m &&
		t.Field(0).Offset == 0 && t.Size() == m.Size()
}()

// guestMemory returns the linear memory of the module whose export call
// ctx belongs to (the plugin Extism put in the call's context), or nil.
// It is that instance's own memory: the guest can read and write all of it
// anyway.
func guestMemory(ctx context.Context) api.Memory {
	if !moduleLayoutOK {
		return nil
	}
	pl, ok := ctx.Value(extism.PluginCtxKey("plugin")).(*extism.Plugin)
	if !ok || pl == nil {
		return nil
	}
	m := pl.Module()
	if m == nil {
		return nil
	}
	// extism.Module is struct{ inner api.Module } (moduleLayoutOK), so a
	// pointer to it is a pointer to its only field.
	inner := *(*api.Module)(unsafe.Pointer(m))
	if inner == nil || inner.IsClosed() {
		return nil
	}
	return inner.Memory()
}
