"""Users through the e2b SDK, unchanged: the caller sets the E2B_* variables
and serves a base whose root has E2B's user `user` (users_test.go). Runs
commands and file calls as the default user and as root, names a user the
root lacks, and builds templates with and without USER. Prints one JSON
object of what it saw, which users_test.go checks."""
import json

from e2b import AuthenticationException, CommandExitException, Sandbox, Template

out = {}


def owner(info):
    return f"{info.owner}:{info.group}"


sb = Sandbox.create(timeout=120)
out["default"] = sb.commands.run('echo "$(whoami) $(id -u) $(id -g) $HOME $(pwd)"').stdout.strip()
out["root"] = sb.commands.run('echo "$(whoami) $(id -u) $HOME"', user="root").stdout.strip()
out["background"] = sb.commands.run("sleep 0.1; whoami", background=True).wait().stdout.strip()

sb.files.write("a.txt", "x")
out["write_owner"] = owner(sb.files.get_info("a.txt"))
sb.files.write("made/deeper/b.txt", "y")
out["made_dir_owner"] = owner(sb.files.get_info("made"))
out["nested_dir_owner"] = owner(sb.files.get_info("made/deeper"))
sb.files.write("/tmp/r.txt", "z", user="root")
out["root_write_owner"] = owner(sb.files.get_info("/tmp/r.txt"))
out["list_owner"] = ",".join(sorted({owner(e) for e in sb.files.list("/home/user")}))
sb.files.make_dir("dir-made")
out["mkdir_owner"] = owner(sb.files.get_info("dir-made"))
snap = sb.create_snapshot()
child = Sandbox.create(template=snap.snapshot_id, timeout=60)
out["from_snapshot"] = child.commands.run("whoami").stdout.strip()
child.kill()
forked = sb.fork(count=1)[0]
out["fork"] = forked.commands.run("whoami").stdout.strip()
forked.kill()
try:
    sb.commands.run("touch /root/nope")
    out["denied"] = "ran"
except CommandExitException as e:
    out["denied"] = f"exit {e.exit_code}: {e.stderr.strip()}"
for key, call in [
    ("unknown_command", lambda: sb.commands.run("whoami", user="ghost")),
    ("unknown_read", lambda: sb.files.read("a.txt", user="ghost")),
]:
    try:
        call()
        out[key] = "accepted"
    except AuthenticationException as e:
        out[key] = f"AuthenticationException: {e}"
sb.kill()

Template.build(Template().from_template("base").set_user("root").run_cmd("whoami > /built-as"), "msb-test-root-user")
sb = Sandbox.create("msb-test-root-user", timeout=120)
out["root_template"] = sb.commands.run("whoami").stdout.strip()
out["built_as"] = sb.files.read("/built-as").strip()
sb.kill()

Template.build(Template().from_template("base").run_cmd("whoami > built-default"), "msb-test-default-user")
sb = Sandbox.create("msb-test-default-user", timeout=120)
out["user_template"] = sb.commands.run("whoami; cat built-default; stat -c %U built-default").stdout.strip().replace("\n", " ")
sb.kill()
print(json.dumps(out))
