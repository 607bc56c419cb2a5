// Package mount describes mounts as data and performs them.
//
// A Mount is one serialized mount(2) call: source, target, filesystem type,
// flags and data. Code that plans a sandbox's filesystem returns a []Mount
// and a single function (Apply) performs them in order, so the plan can be
// inspected and tested without privileges. Overlay builds the overlayfs
// mount that joins read-only layers (lower dirs) with a private writable
// upper dir; Bind builds a bind mount, read-only when asked.
package mount
