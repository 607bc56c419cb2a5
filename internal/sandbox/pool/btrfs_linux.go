package pool

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The btrfs ioctls a pool uses (linux/btrfs.h).
const (
	iocSubvolCreate = 0x5000940e // _IOW(0x94, 14, struct btrfs_ioctl_vol_args)
	iocSnapDestroy  = 0x5000940f // _IOW(0x94, 15, struct btrfs_ioctl_vol_args)
	iocQuotaCtl     = 0xc0109428 // _IOWR(0x94, 40, struct btrfs_ioctl_quota_ctl_args)
	iocQgroupLimit  = 0x8030942b // _IOR(0x94, 43, struct btrfs_ioctl_qgroup_limit_args)

	quotaEnable       = 1 // BTRFS_QUOTA_CTL_ENABLE
	quotaEnableSimple = 4 // BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA (Linux 6.7+)

	qgroupLimitMaxRfer = 1 // BTRFS_QGROUP_LIMIT_MAX_RFER
)

// volArgs is struct btrfs_ioctl_vol_args.
type volArgs struct {
	fd   int64
	name [4088]byte
}

// quotaCtlArgs is struct btrfs_ioctl_quota_ctl_args.
type quotaCtlArgs struct {
	cmd, status uint64
}

// qgroupLimitArgs is struct btrfs_ioctl_qgroup_limit_args.
type qgroupLimitArgs struct {
	qgroupid                                 uint64
	flags, maxRfer, maxExcl, rsvRfer, rsvExc uint64
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// iocDevInfo is BTRFS_IOC_DEV_INFO, _IOWR(0x94, 30, struct btrfs_ioctl_dev_info_args).
const iocDevInfo = 0xd000941e

// devInfoArgs is struct btrfs_ioctl_dev_info_args (4096 bytes).
type devInfoArgs struct {
	devid      uint64
	uuid       [16]byte
	bytesUsed  uint64
	totalBytes uint64
	fsid       [16]byte
	unused     [377]uint64
	path       [1024]byte
}
