// Package vmtest boots a throwaway Linux virtual machine and runs one shell
// script in it as root, so that tests can run msb on a host layout this
// machine does not have: a pure cgroup v2 hierarchy that holds every
// controller (most current distributions), where the CI host has them on
// cgroup v1.
//
// A Kernel is a kernel image with its modules directory (Debian's
// linux-image-amd64 puts them in /boot and /lib/modules). The guest's root
// is the host's own root, read-only over 9p, under an overlay whose upper
// dir is a tmpfs: the guest sees the host's binaries, the test binary
// included, and what it writes is gone at power-off. /tmp, /run and
// /var/tmp are tmpfs of their own (an overlay upper dir cannot sit on an
// overlay), and cgroup2 is mounted alone at /sys/fs/cgroup.
//
// The initramfs holds the guest's init, which is the calling test binary
// itself (a static Go program: TestMain hands over to GuestMain when IsGuest
// says it runs as the guest's PID 1), and the modules that mounting the
// root needs. QEMU runs with TCG, the emulator, as this host has no usable
// KVM: a boot takes seconds and programs run several times slower than on
// the host, so tests pick what they run in it. The guest has no network
// device. Its console is the serial port; init prints the script's exit
// status on it last (ExitMarker) and powers off.
//
// With Options.Systemd, init makes the same root and then executes the
// host's systemd as the system manager, booted into a target of its own
// (SystemdTarget) whose one service runs the script and then prints its
// status and powers off in init's place: how a test gets logind, the
// system bus and PAM login sessions (about 20 s more per boot).
package vmtest
