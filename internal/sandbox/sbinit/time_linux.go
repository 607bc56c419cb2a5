package sbinit

import (
	"time"

	"golang.org/x/sys/unix"
)

func timeOf(st unix.Stat_t) time.Time { return time.Unix(st.Mtim.Sec, st.Mtim.Nsec) }
