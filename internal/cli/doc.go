// Package cli is msb's command line: one file per verb (cmd_<verb>.go, each
// a newXCmd constructor and a runX function), the global flags, and the one
// map from errors to exit codes (exitCode).
package cli
