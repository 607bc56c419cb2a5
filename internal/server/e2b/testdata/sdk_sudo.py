"""sudo as E2B's user through the e2b SDK, on a base with `user`: commands
run as user get root (and back) through sudo, with sudo's environment
rules, in a fork's child and after pause and connect too, from a shell
that runs with no_new_privs as every sandbox process does. Prints one JSON
object, which sudo_test.go checks."""
import json

from e2b import Sandbox

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

child = sb.fork(count=1)[0]
out["fork"] = run(child, "sudo id -un")
child.kill()
sb.pause()
sb = Sandbox.connect(sb.sandbox_id)
out["resumed"] = run(sb, "sudo id -un")
sb.kill()
print(json.dumps(out))
