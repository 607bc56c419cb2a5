// Package seccomp builds and installs the sandbox's system-call filter.
//
// The filter is a classic BPF program (a Program) evaluated by the kernel on
// every system call: calls on the deny list fail with EPERM, clone and
// unshare requests for new namespaces fail with EPERM, clone3 fails with
// ENOSYS (its flags live in memory a filter cannot read, and libc falls back
// to clone), and anything not from the native x86_64 ABI is refused. The deny
// list is the calls an agent never needs and that would let it reach past the
// sandbox: mount and the new mount API, pivot_root, chroot, kexec, bpf, keyctl,
// module loading, clock setting, ptrace and process_vm_*, perf events,
// userfaultfd, swap, reboot and file handles.
package seccomp
