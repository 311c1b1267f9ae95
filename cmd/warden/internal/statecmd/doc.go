// Package statecmd holds the owner's access to warden's state: `warden
// audit`, `warden memory` and `warden store`.
package statecmd
