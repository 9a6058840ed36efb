// Command binfmtns runs a command as root of a new user, mount and PID
// namespace that has its own binfmt_misc instance, with qemu-user-static's
// handler for one foreign architecture registered there. mmdebstrap then
// builds a root filesystem of that architecture in its usual root mode: the
// maintainer scripts it runs in the chroot execute under qemu, exactly as the
// native build runs them, and the host's binfmt_misc is never touched.
//
// Why a namespace: registering a handler on the host changes how the whole
// machine executes foreign binaries, for every user and for as long as it
// stays registered. Since Linux 6.7 a user namespace may mount its own
// binfmt_misc; its handlers serve only the processes inside and vanish with
// the namespace. The namespace maps user and group IDs 0-65535 to themselves
// (dpkg chowns files to system users and groups), so the files mmdebstrap
// writes carry the same owners as in a build on the host.
//
// Usage:
//
//	binfmtns -arch arm64 -- mmdebstrap --architectures=arm64 ...
//
// The handler is read from /usr/lib/binfmt.d/qemu-<qemu arch>.conf (Debian's
// qemu-user-static). -arch naming the host's own architecture runs the
// command without a namespace. The exit status is the command's.
package main
