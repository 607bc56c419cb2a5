// Package cli is msb's command line: one file per verb (cmd_<verb>.go, each
// a newXCmd constructor and a runX function), the global flags, and the one
// map from errors to exit codes (exitCode).
//
// It builds two ways. Without tags it is the full msb (bin/msb-full): every
// verb. With -tags msblean it is the lean msb (bin/msb): the files that need
// the engine (they start with //go:build !msblean) are left out, so the
// verbs that start sandboxes on the host or talk to the daemon link the
// sandbox layer (package engine/host) and the client alone and start fast;
// each verb left out is a forwarder that execs msb-full with msb's
// arguments (full.go lists those verbs, lean.go forwards them).
package cli
