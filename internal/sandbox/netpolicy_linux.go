package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// forwarder is the slirp4netns process of a filtered sandbox. It ends when
// exit (its --exit-fd) is closed: by stop, or by the kernel when msb dies.
type forwarder struct {
	cmd  *exec.Cmd
	exit *os.File
	done chan struct{} // closed once cmd is reaped
}

// forwarderPrograms are what a filtered sandbox needs on the host;
// lookForwarder also looks for them in forwarderSbin.
var (
	forwarderPrograms = []string{"slirp4netns", "nft", "nsenter"}
	forwarderSbin     = []string{"/usr/sbin", "/sbin"}
)

// lookForwarder finds the forwarder's programs on PATH, then in the sbin
// directories an unprivileged user's PATH often lacks, or says which is
// missing (ErrNoForwarder).
func lookForwarder() (map[string]string, error) {
	paths := map[string]string{}
	for _, p := range forwarderPrograms {
		path, err := exec.LookPath(p)
		for _, dir := range forwarderSbin {
			if err != nil {
				path, err = exec.LookPath(filepath.Join(dir, p))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: a filtered network needs %s on the host's PATH (Debian: apt-get install slirp4netns nftables util-linux)", ErrNoForwarder, p)
		}
		paths[p] = path
	}
	return paths, nil
}

// startNetwork gives a filtered sandbox its policy and its way out: the
// nftables rules first, in its network namespace (where the sandbox's
// processes, without CAP_NET_ADMIN, cannot change them), then the
// forwarder, which brings up the route out. Nothing in the sandbox runs
// before it returns.
func (s *Sandbox) startNetwork(ctx context.Context) error {
	if s.conf.Network != NetworkFiltered {
		return nil
	}
	paths, err := lookForwarder()
	if err != nil {
		return err
	}
	policy := s.conf.NetPolicy
	if policy == nil {
		policy = &NetPolicy{}
	}
	rules, err := policy.resolve(ctx, defaultResolver)
	if err != nil {
		return err
	}
	pid := s.cmd.Process.Pid
	if err := s.applyRules(ctx, paths["nsenter"], paths["nft"], pid, rules.ruleset()); err != nil {
		return err
	}
	f, err := s.startForwarder(ctx, paths["slirp4netns"], pid, rules.hostLoopback())
	if err != nil {
		return err
	}
	s.fwd = f
	return nil
}

// applyRules loads ruleset into the network namespace of pid, entering its
// user namespace too when rootless (the namespace msb's user owns).
func (s *Sandbox) applyRules(ctx context.Context, nsenter, nft string, pid int, ruleset string) error {
	ns := "/proc/" + strconv.Itoa(pid) + "/ns/"
	args := []string{"--net=" + ns + "net"}
	if s.rt.rootless {
		args = append(args, "--preserve-credentials", "--user="+ns+"user")
	}
	cmd := exec.CommandContext(ctx, nsenter, append(args, nft, "-f", "-")...)
	cmd.Stdin = bytes.NewBufferString(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("loading the network policy into the sandbox (nft -f): %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// startForwarder starts slirp4netns for the network namespace of pid and
// waits until it has configured the sandbox's interface and route.
// Without loopback the host's 127.0.0.1 is closed to it, whatever the rules.
func (s *Sandbox) startForwarder(ctx context.Context, slirp string, pid int, loopback bool) (*forwarder, error) {
	ns := "/proc/" + strconv.Itoa(pid) + "/ns/"
	args := []string{"--configure", "--mtu=" + strconv.Itoa(forwarderMTU), "--cidr=" + forwarderCIDR,
		"--exit-fd=3", "--ready-fd=4", "--enable-seccomp", "--netns-type=path"}
	if s.rt.rootless {
		// slirp4netns's --enable-sandbox cannot set its ids in a user
		// namespace it joins; its seccomp filter still applies.
		args = append(args, "--userns-path="+ns+"user")
	} else {
		args = append(args, "--enable-sandbox")
	}
	if !loopback {
		args = append(args, "--disable-host-loopback")
	}
	args = append(args, ns+"net", forwarderTap)
	exitR, exitW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("forwarder exit pipe: %w", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		exitR.Close()
		exitW.Close()
		return nil, fmt.Errorf("forwarder ready pipe: %w", err)
	}
	log := &tailBuffer{max: 4 << 10}
	cmd := exec.Command(slirp, args...)
	cmd.ExtraFiles = []*os.File{exitR, readyW}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = cmd.Start()
	exitR.Close()
	readyW.Close()
	if err != nil {
		readyR.Close()
		exitW.Close()
		return nil, fmt.Errorf("starting the network forwarder %s: %w", slirp, err)
	}
	f := &forwarder{cmd: cmd, exit: exitW, done: make(chan struct{})}
	go func() { waitExit(cmd.Process); cmd.Wait(); close(f.done) }()
	err = awaitReady(ctx, readyR, f.done)
	readyR.Close()
	if err != nil {
		f.stop()
		return nil, fmt.Errorf("network forwarder %s: %w; it said: %s", filepath.Base(slirp), err, bytes.TrimSpace([]byte(log.String())))
	}
	return f, nil
}

// awaitReady waits for the forwarder to write its ready byte (the
// interface is up, the route set), to exit, or for ctx.
func awaitReady(ctx context.Context, ready *os.File, done <-chan struct{}) error {
	got := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := ready.Read(b[:])
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			return fmt.Errorf("exited before the network was up: %w", err)
		}
		return nil
	case <-done:
		return fmt.Errorf("exited before the network was up")
	case <-ctx.Done():
		ready.SetReadDeadline(time.Now()) // ends the reader
		return ctx.Err()
	}
}

// stop ends the forwarder and waits until it is reaped: closing its exit
// fd asks it to go, a kill after a second makes it.
func (f *forwarder) stop() {
	if f == nil {
		return
	}
	f.exit.Close()
	select {
	case <-f.done:
		return
	case <-time.After(time.Second):
	}
	f.cmd.Process.Kill()
	<-f.done
}

// prepareNetwork checks, before a filtered sandbox starts, that the host
// has its forwarder, and makes its /etc/resolv.conf, naming the
// forwarder's resolver, in its state dir: the bind that puts it there.
func (s *Sandbox) prepareNetwork() (Bind, error) {
	if _, err := lookForwarder(); err != nil {
		return Bind{}, err
	}
	p := filepath.Join(s.dir, "resolv.conf")
	if err := os.WriteFile(p, []byte(resolvConf), 0o644); err != nil {
		return Bind{}, fmt.Errorf("writing the sandbox's resolv.conf: %w", err)
	}
	return Bind{Source: p, Target: "/etc/resolv.conf", ReadOnly: true}, nil
}
