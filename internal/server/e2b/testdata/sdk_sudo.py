"""sudo as E2B's user through the e2b SDK, on a base with `user`: commands
run as user get root (and back) through sudo, with sudo's environment
rules, in a fork's child and after pause and connect too, from a shell
that runs with no_new_privs as every sandbox process does; and from a
terminal (pty.create), where its command gets a terminal of its own. Prints one JSON
object, which sudo_test.go checks."""
import json
import re

from e2b import PtySize, Sandbox

out = {}
sb = Sandbox.create(timeout=120)
run = lambda s, cmd, **kw: s.commands.run(cmd, **kw).stdout

out["ids"] = run(sb, "id -un; sudo id -un; sudo -u user id -un; grep NoNewPrivs /proc/self/status")
out["root_file"] = run(sb, "sudo touch /root/by-sudo && sudo ls /root && stat -c %U /root/by-sudo")
# E2B's own suite: test_bash_command_scoped_env_vars.
scoped = sb.commands.run("echo $FOO", envs={"FOO": "bar"}).stdout
cmd2 = sb.commands.run('sudo echo "$FOO"')
out["scoped"] = [scoped, cmd2.exit_code, cmd2.stdout]
out["env"] = run(sb, 'sudo bash -c \'echo "[$FOO] $HOME $SUDO_USER"\'; sudo -E bash -c \'echo "[$FOO] $HOME"\'', envs={"FOO": "kept"})
out["as_root"] = run(sb, "sudo id -un", user="root")
out["status"] = sb.commands.run("sudo bash -c 'exit 3'; echo $?").stdout

# sudo from a terminal (pty.create): its command gets a terminal of its
# own, as Debian's sudo (use_pty) gives it; keys, Ctrl-C and the window
# size reach it. Markers are made by the shell ($((n))), so the terminal's
# echo of a typed line never matches them; the prompt is waited for before
# typing after a sudo, whose command would read keys typed sooner.
h = sb.pty.create(PtySize(rows=24, cols=80), timeout=120)
events = iter(h)
seen = [b""]


def until(pattern):
    while not re.search(pattern, seen[0]):
        try:
            _, _, data = next(events)
        except Exception:
            raise SystemExit("no %r in the pty's output %r" % (pattern, seen[0]))
        seen[0] += data or b""
    m = re.search(pattern, seen[0])
    seen[0] = seen[0][m.end():]
    return m.group(1).decode()


def send(line):
    sb.pty.send_stdin(h.pid, line.encode())


send("PS1='p''> '\n")
until(rb"(p> )")
send('o=$(tty); i=$(sudo tty); echo "tty-$((1)) $o $i $(sudo stty size) $(sudo id -un)"\n')
out["pty_tty"] = until(rb"tty-1 ([^\r\n]*)")
send("sudo -i\n")
send('echo "in-$((2)) $(id -un) $PWD"; exit 3\n')
out["pty_login"] = until(rb"in-2 ([^\r\n]*)")
until(rb"(p> )")
send('echo "rc-$((3))=$?"\n')
out["pty_login_exit"] = until(rb"rc-3=(\d+)")
send("sudo bash -c 'echo \"sz-$((4)) $(stty size)\"; while [ \"$(stty size)\" = \"24 80\" ]; do sleep 0.05; done; echo \"rs-$((5)) $(stty size)\"'\n")
until(rb"sz-4 (\d+ \d+)")
sb.pty.resize(h.pid, PtySize(rows=40, cols=120))
out["pty_resized"] = until(rb"rs-5 (\d+ \d+)")
until(rb"(p> )")
send("sudo bash -c 'echo \"ready-$((6))\"; exec sleep 60'\n")
until(rb"(ready-6)")
send("\x03")
until(rb"(p> )")
send('echo "rc-$((7))=$?"\n')
out["pty_ctrl_c"] = until(rb"rc-7=(\d+)")
sb.pty.kill(h.pid)

child = sb.fork(count=1)[0]
out["fork"] = run(child, "sudo id -un")
child.kill()
sb.pause()
sb = Sandbox.connect(sb.sandbox_id)
out["resumed"] = run(sb, "sudo id -un")
sb.kill()
print(json.dumps(out))
