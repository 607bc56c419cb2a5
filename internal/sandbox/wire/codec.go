package wire

import (
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// The binary encoding (binary.go) of each message type: appendWire writes
// its fields, decodeWire reads them. Field numbers are the protocol: never
// reuse or renumber one; a new field takes the next number.

// binaryMessage is a message type with a binary encoding.
type binaryMessage interface {
	appendWire(e *enc)
}

// binaryTarget is a pointer to a message type with a binary encoding.
type binaryTarget interface {
	decodeWire(d *dec)
}

func (r Request) appendWire(e *enc) {
	e.uint(1, r.ID)
	e.str(2, r.Op)
	e.str(3, r.Session)
	e.str(4, r.To)
	e.str(5, r.Path)
	e.bytes(6, r.Data)
	e.uint(7, uint64(r.Mode))
	e.strs(8, r.Argv)
	e.strs(9, r.Env)
	e.str(10, r.Dir)
	e.uint(11, uint64(r.Rows))
	e.uint(12, uint64(r.Cols))
	e.int(13, r.Limit)
	if r.Exec != nil {
		e.msg(14, func(e *enc) { appendExecRequest(e, r.Exec) })
	}
	e.bool(15, r.Stream)
	e.uint(16, r.Ref)
	if r.Owner != nil {
		e.msg(17, func(e *enc) { e.int(1, int64(r.Owner.UID)); e.int(2, int64(r.Owner.GID)) })
	}
	e.int(18, int64(r.Port))
	e.str(19, r.Key)
	e.int(20, r.Off)
	e.str(21, r.From)
}

func (r *Request) decodeWire(d *dec) {
	r.binary = true
	for d.next() {
		switch d.f {
		case 1:
			r.ID = d.uint()
		case 2:
			r.Op = d.str()
		case 3:
			r.Session = d.str()
		case 4:
			r.To = d.str()
		case 5:
			r.Path = d.str()
		case 6:
			r.Data = d.bytes()
		case 7:
			r.Mode = uint32(d.uint())
		case 8:
			r.Argv = append(r.Argv, d.str())
		case 9:
			r.Env = append(r.Env, d.str())
		case 10:
			r.Dir = d.str()
		case 11:
			r.Rows = uint16(d.uint())
		case 12:
			r.Cols = uint16(d.uint())
		case 13:
			r.Limit = d.int64()
		case 14:
			r.Exec = &session.ExecRequest{}
			d.msg(func(d *dec) { decodeExecRequest(d, r.Exec) })
		case 15:
			r.Stream = d.bool()
		case 16:
			r.Ref = d.uint()
		case 17:
			r.Owner = &FileOwner{}
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						r.Owner.UID = d.int()
					case 2:
						r.Owner.GID = d.int()
					default:
						d.skip()
					}
				}
			})
		case 18:
			r.Port = d.int()
		case 19:
			r.Key = d.str()
		case 20:
			r.Off = d.int64()
		case 21:
			r.From = d.str()
		default:
			d.skip()
		}
	}
}

func appendExecRequest(e *enc, x *session.ExecRequest) {
	e.str(1, x.Command)
	e.int(2, int64(x.Timeout))
	e.bool(3, x.SeparateStderr)
	e.int(4, int64(x.MaxOutput))
	e.bool(5, x.Interactive)
	e.bool(6, x.Input)
	e.bool(7, x.Interrupt)
	e.strs(8, x.Expect)
}

func decodeExecRequest(d *dec, x *session.ExecRequest) {
	for d.next() {
		switch d.f {
		case 1:
			x.Command = d.str()
		case 2:
			x.Timeout = time.Duration(d.int64())
		case 3:
			x.SeparateStderr = d.bool()
		case 4:
			x.MaxOutput = d.int()
		case 5:
			x.Interactive = d.bool()
		case 6:
			x.Input = d.bool()
		case 7:
			x.Interrupt = d.bool()
		case 8:
			x.Expect = append(x.Expect, d.str())
		default:
			d.skip()
		}
	}
}

func (r Response) appendWire(e *enc) {
	e.uint(1, r.ID)
	e.str(2, r.Error)
	e.str(3, r.Code)
	e.bytes(4, r.Data)
	e.int(5, int64(r.Exit))
	for i := range r.Entries {
		x := &r.Entries[i]
		e.msg(6, func(e *enc) {
			e.str(1, x.Name)
			e.str(2, x.Type)
			e.int(3, x.Size)
			e.uint(4, uint64(x.Mode))
			e.str(5, x.Target)
			e.int(6, x.ModTime)
			e.int(7, int64(x.UID))
			e.int(8, int64(x.GID))
		})
	}
	if r.Result != nil {
		e.msg(7, func(e *enc) { appendResult(e, r.Result) })
	}
	if r.Info != nil {
		e.msg(8, func(e *enc) {
			e.int(1, int64(r.Info.SupervisorPid))
			e.int(2, int64(r.Info.DiskFd))
			appendStamps(e, 3, r.Info.Stamps)
		})
	}
	e.bool(9, r.More)
	e.str(10, r.Stream)
	e.int(11, r.Off)
	if r.Execs != nil {
		e.msg(12, func(e *enc) {
			e.uint(1, r.Execs.Last)
			for _, s := range r.Execs.Streams {
				e.msg(2, func(e *enc) {
					e.uint(1, s.ID)
					e.str(2, s.Key)
					e.int(3, s.Acked)
					e.int(4, s.Sent)
				})
			}
			e.bool(3, r.Execs.Binary)
		})
	}
	e.bool(13, r.Fd)
}

func (r *Response) decodeWire(d *dec) {
	for d.next() {
		switch d.f {
		case 1:
			r.ID = d.uint()
		case 2:
			r.Error = d.str()
		case 3:
			r.Code = d.str()
		case 4:
			r.Data = d.bytes()
		case 5:
			r.Exit = d.int()
		case 6:
			var x Entry
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						x.Name = d.str()
					case 2:
						x.Type = d.str()
					case 3:
						x.Size = d.int64()
					case 4:
						x.Mode = uint32(d.uint())
					case 5:
						x.Target = d.str()
					case 6:
						x.ModTime = d.int64()
					case 7:
						x.UID = d.int()
					case 8:
						x.GID = d.int()
					default:
						d.skip()
					}
				}
			})
			r.Entries = append(r.Entries, x)
		case 7:
			r.Result = &session.Result{}
			d.msg(func(d *dec) { decodeResult(d, r.Result) })
		case 8:
			r.Info = &Ready{}
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						r.Info.SupervisorPid = d.int()
					case 2:
						r.Info.DiskFd = d.int()
					case 3:
						r.Info.Stamps = append(r.Info.Stamps, decodeStamp(d))
					default:
						d.skip()
					}
				}
			})
		case 9:
			r.More = d.bool()
		case 10:
			r.Stream = d.str()
		case 11:
			r.Off = d.int64()
		case 12:
			r.Execs = &Execs{}
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						r.Execs.Last = d.uint()
					case 2:
						var s ExecState
						d.msg(func(d *dec) {
							for d.next() {
								switch d.f {
								case 1:
									s.ID = d.uint()
								case 2:
									s.Key = d.str()
								case 3:
									s.Acked = d.int64()
								case 4:
									s.Sent = d.int64()
								default:
									d.skip()
								}
							}
						})
						r.Execs.Streams = append(r.Execs.Streams, s)
					case 3:
						r.Execs.Binary = d.bool()
					default:
						d.skip()
					}
				}
			})
		case 13:
			r.Fd = d.bool()
		default:
			d.skip()
		}
	}
}

func appendResult(e *enc, x *session.Result) {
	e.str(1, x.Output)
	e.str(2, x.Stderr)
	e.int(3, int64(x.ExitCode))
	e.int(4, int64(x.Duration))
	e.bool(5, x.Truncated)
	e.bool(6, x.TimedOut)
	e.bool(7, x.SessionEnded)
	e.bool(8, x.Running)
	e.str(9, x.Matched)
}

func decodeResult(d *dec, x *session.Result) {
	for d.next() {
		switch d.f {
		case 1:
			x.Output = d.str()
		case 2:
			x.Stderr = d.str()
		case 3:
			x.ExitCode = d.int()
		case 4:
			x.Duration = time.Duration(d.int64())
		case 5:
			x.Truncated = d.bool()
		case 6:
			x.TimedOut = d.bool()
		case 7:
			x.SessionEnded = d.bool()
		case 8:
			x.Running = d.bool()
		case 9:
			x.Matched = d.str()
		default:
			d.skip()
		}
	}
}

func appendStamps(e *enc, f int, ss []Stamp) {
	for _, s := range ss {
		e.msg(f, func(e *enc) { e.str(1, s.Step); e.int(2, s.Mono) })
	}
}

func decodeStamp(d *dec) Stamp {
	var s Stamp
	d.msg(func(d *dec) {
		for d.next() {
			switch d.f {
			case 1:
				s.Step = d.str()
			case 2:
				s.Mono = d.int64()
			default:
				d.skip()
			}
		}
	})
	return s
}

func (c Config) appendWire(e *enc) {
	e.str(1, c.ID)
	e.str(2, c.Root)
	e.list(3, c.Lowers)
	e.str(4, c.Upper)
	e.str(5, c.RootBind)
	e.str(6, c.Work)
	e.bool(7, c.UserXattr)
	e.bool(8, c.Rootless)
	if c.Disk != nil {
		e.msg(9, func(e *enc) {
			e.str(1, c.Disk.Mount)
			e.str(2, c.Disk.Device)
			e.str(3, c.Disk.Subvol)
			e.int(4, c.Disk.TmpfsBytes)
			e.int(5, int64(c.Disk.Fd))
		})
	}
	e.strs(10, c.HostDirs)
	e.bool(11, c.HostIdmap)
	e.strs(12, c.Masks)
	for _, b := range c.Binds {
		e.msg(13, func(e *enc) { e.str(1, b.Source); e.str(2, b.Target); e.bool(3, b.ReadOnly) })
	}
	e.str(14, c.Hostname)
	e.str(15, c.Network)
	e.int(16, c.TmpBytes)
	e.int(17, c.ShmBytes)
	e.bool(18, c.LimitInodes)
	e.str(19, c.Workdir)
	e.list(20, c.Env)
	e.int(21, int64(c.UID))
	e.int(22, int64(c.GID))
	for _, o := range c.Owners {
		e.msg(23, func(e *enc) { e.str(1, o.Path); e.int(2, int64(o.UID)); e.int(3, int64(o.GID)) })
	}
	for _, r := range c.Rlimits {
		e.msg(24, func(e *enc) { e.int(1, int64(r.Resource)); e.str(2, r.Name); e.uint(3, r.Value) })
	}
	e.bool(25, c.CgroupNS)
	e.int(26, int64(c.MaxOutput))
	e.bool(27, c.NoHugePages)
	if c.Cgroup != nil {
		e.msg(28, func(e *enc) {
			e.bool(1, c.Cgroup.V2)
			for _, h := range c.Cgroup.Hierarchies {
				e.msg(2, func(e *enc) { e.str(1, h.Dir); e.str(2, h.Options); e.strs(3, h.Links) })
			}
		})
	}
	if c.Iface != nil {
		e.msg(29, func(e *enc) { e.str(1, c.Iface.Name); e.str(2, c.Iface.Addr) })
	}
	e.bool(30, c.NetReady)
	e.bool(31, c.RootAhead)
	e.bool(32, c.Sudo)
	if c.Session != nil {
		e.msg(33, func(e *enc) { e.str(1, c.Session.Name); e.strs(2, c.Session.Env); e.str(3, c.Session.Dir) })
	}
	appendStamps(e, 34, c.Stamps)
}

func (c *Config) decodeWire(d *dec) {
	c.binary = true
	for d.next() {
		switch d.f {
		case 1:
			c.ID = d.str()
		case 2:
			c.Root = d.str()
		case 3:
			c.Lowers = d.list()
		case 4:
			c.Upper = d.str()
		case 5:
			c.RootBind = d.str()
		case 6:
			c.Work = d.str()
		case 7:
			c.UserXattr = d.bool()
		case 8:
			c.Rootless = d.bool()
		case 9:
			c.Disk = &Disk{}
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						c.Disk.Mount = d.str()
					case 2:
						c.Disk.Device = d.str()
					case 3:
						c.Disk.Subvol = d.str()
					case 4:
						c.Disk.TmpfsBytes = d.int64()
					case 5:
						c.Disk.Fd = d.int()
					default:
						d.skip()
					}
				}
			})
		case 10:
			c.HostDirs = append(c.HostDirs, d.str())
		case 11:
			c.HostIdmap = d.bool()
		case 12:
			c.Masks = append(c.Masks, d.str())
		case 13:
			var b Bind
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						b.Source = d.str()
					case 2:
						b.Target = d.str()
					case 3:
						b.ReadOnly = d.bool()
					default:
						d.skip()
					}
				}
			})
			c.Binds = append(c.Binds, b)
		case 14:
			c.Hostname = d.str()
		case 15:
			c.Network = d.str()
		case 16:
			c.TmpBytes = d.int64()
		case 17:
			c.ShmBytes = d.int64()
		case 18:
			c.LimitInodes = d.bool()
		case 19:
			c.Workdir = d.str()
		case 20:
			c.Env = d.list()
		case 21:
			c.UID = d.int()
		case 22:
			c.GID = d.int()
		case 23:
			var o Owner
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						o.Path = d.str()
					case 2:
						o.UID = d.int()
					case 3:
						o.GID = d.int()
					default:
						d.skip()
					}
				}
			})
			c.Owners = append(c.Owners, o)
		case 24:
			var r Rlimit
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						r.Resource = d.int()
					case 2:
						r.Name = d.str()
					case 3:
						r.Value = d.uint()
					default:
						d.skip()
					}
				}
			})
			c.Rlimits = append(c.Rlimits, r)
		case 25:
			c.CgroupNS = d.bool()
		case 26:
			c.MaxOutput = d.int()
		case 27:
			c.NoHugePages = d.bool()
		case 28:
			c.Cgroup = &CgroupFS{}
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						c.Cgroup.V2 = d.bool()
					case 2:
						var h CgroupHierarchy
						d.msg(func(d *dec) {
							for d.next() {
								switch d.f {
								case 1:
									h.Dir = d.str()
								case 2:
									h.Options = d.str()
								case 3:
									h.Links = append(h.Links, d.str())
								default:
									d.skip()
								}
							}
						})
						c.Cgroup.Hierarchies = append(c.Cgroup.Hierarchies, h)
					default:
						d.skip()
					}
				}
			})
		case 29:
			c.Iface = &Iface{}
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						c.Iface.Name = d.str()
					case 2:
						c.Iface.Addr = d.str()
					default:
						d.skip()
					}
				}
			})
		case 30:
			c.NetReady = d.bool()
		case 31:
			c.RootAhead = d.bool()
		case 32:
			c.Sudo = d.bool()
		case 33:
			c.Session = &SessionStart{}
			d.msg(func(d *dec) {
				for d.next() {
					switch d.f {
					case 1:
						c.Session.Name = d.str()
					case 2:
						c.Session.Env = append(c.Session.Env, d.str())
					case 3:
						c.Session.Dir = d.str()
					default:
						d.skip()
					}
				}
			})
		case 34:
			c.Stamps = append(c.Stamps, decodeStamp(d))
		default:
			d.skip()
		}
	}
}
