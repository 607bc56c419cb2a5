package vmtest

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes a cpio archive in the "newc" format, the one the
// kernel unpacks as an initramfs: per entry a 110-byte ASCII header, the
// name and the data, each padded to 4 bytes; a "TRAILER!!!" entry ends it.
type cpioWriter struct {
	w    io.Writer
	ino  int
	err  error
	size int64
}

const (
	cpioDir  = 0o040000
	cpioFile = 0o100000
	cpioChar = 0o020000
)

func (c *cpioWriter) dir(name string) { c.entry(name, cpioDir|0o755, nil) }

func (c *cpioWriter) file(name string, mode uint32, data []byte) {
	c.entry(name, cpioFile|mode, data)
}

// charDev adds a character device node (major, minor).
func (c *cpioWriter) charDev(name string, major, minor int) {
	c.entryDev(name, cpioChar|0o600, nil, major, minor)
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) { c.entryDev(name, mode, data, 0, 0) }

func (c *cpioWriter) entryDev(name string, mode uint32, data []byte, major, minor int) {
	if c.err != nil {
		return
	}
	c.ino++
	name = strings.TrimPrefix(name, "/")
	nlink := 1
	if mode&cpioDir != 0 {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize (with its NUL), check.
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, major, minor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name + "\x00"))
	c.pad()
	c.write(data)
	c.pad()
}

func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.size += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.size % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}
