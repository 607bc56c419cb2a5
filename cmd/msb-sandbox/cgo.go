//go:build msbcgo

package main

// Built with -tags msbcgo and CGO_ENABLED=1, msb-sandbox links the cgo
// runtime, as a program that embeds msb's sandbox and uses cgo does. Its
// init cannot then act on all its threads and execs the supervisor instead
// of becoming it; the sandbox package's TestCgoInit builds it so.
import _ "runtime/cgo"
