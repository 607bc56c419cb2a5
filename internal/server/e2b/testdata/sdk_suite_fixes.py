"""What E2B's own SDK test suite (scripts/e2b-sdk-suite.sh) expects of the
base template and envd and msb once answered otherwise: the home directory
(/home/user: the commands' working directory, HOME and where relative paths
start, also of a command's relative cwd), files.list in lexical order,
files.remove of what is not there, a symlink's entry, a killed sandbox's
running command, Template.exists("base"), Template.assign_tags and
remove_tags, signed file URLs (download_url, upload_url), and a template's
start command (set_start_cmd with a ready command), COPY of several files
and a template built FROM base starting in /home/user. Prints one JSON object, which suite_test.go checks."""
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request

from e2b import Sandbox, SandboxNotRunningException, Template, TemplateException, wait_for_file

out = {}
sb = Sandbox.create(timeout=120)
out["pwd_home"] = sb.commands.run("pwd; echo $HOME").stdout.split()
info = sb.files.write("rel.txt", "x")
out["written"] = info.path
out["stat"] = sb.files.get_info("rel.txt").path
for name in ("b", "c/d", "a"):
    sb.files.make_dir("listing/" + name)
sb.files.write("listing/b.txt", "")
out["listed"] = [e.path for e in sb.files.list("listing", depth=2)]
out["rel_cwd"] = sb.commands.run("pwd", cwd="listing/c").stdout.strip()
sb.files.remove("not-there.txt")
out["removed_missing"] = True
sb.commands.run("ln -s ../b.txt link && ln -s /nowhere dangling", cwd="listing/c")
link = sb.files.get_info("listing/c/link")
out["link"] = [link.type.value, link.symlink_target]
dangling = sb.files.get_info("listing/c/dangling")
out["dangling"] = [dangling.type.value, dangling.symlink_target]


def fetch(url, data=None):
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/octet-stream"} if data else {})
    try:
        with urllib.request.urlopen(req) as res:
            return [res.status, res.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, json.loads(e.read())["message"]]


secure = Sandbox.create(timeout=120, secure=True)
secure.files.write("signed.txt", "signed")
# The suite signs for E2B's user `user`, which the host base stands in for
# with its own user (root); any other user it lacks is E2B's 401
# (users_test.go covers a base with `user`).
out["signed"] = [
    fetch(secure.download_url("signed.txt", "user")),
    fetch(secure.download_url("signed.txt", "user", 120)),
    fetch(secure.download_url("signed.txt", "user", use_signature_expiration=-120)),
    fetch(secure.download_url("signed.txt", "user").replace("signature=v1_", "signature=v1_x")),
    fetch(secure.upload_url("up.txt", "user"), b"uploaded")[0],
    fetch(secure.download_url("signed.txt", "ghost"))[0],
]
out["as_user"] = secure.commands.run("whoami", user="user").stdout.strip()
out["uploaded"] = secure.files.read("up.txt")
secure.kill()
handle = sb.commands.run("sleep 60", background=True)
sb.kill()
try:
    handle.wait()
    out["killed_wait"] = "returned"
except SandboxNotRunningException as e:
    out["killed_wait"] = "SandboxNotRunningException" if "end of life" in str(e) else str(e)
except Exception as e:  # noqa: BLE001 - the test reports what the SDK raised
    out["killed_wait"] = f"{type(e).__name__}: {e}"
out["base_exists"] = Template.exists("base")
Template.build(Template().from_template("base").run_cmd("true"), "suite-tags:v1")
tagged = Template.assign_tags("suite-tags:v1", ["prod", "suite-tags:latest"])
out["assigned"] = sorted(tagged.tags)
Template.remove_tags("suite-tags", "prod")
out["tags"] = sorted(t.tag for t in Template.get_tags("suite-tags"))
refused = []
for bad in (":x", "suite-tags:", "other:x"):
    try:
        Template.assign_tags("suite-tags:v1", bad)
    except TemplateException:
        refused.append(bad)
out["refused"] = refused

ctx = tempfile.mkdtemp()
os.makedirs(os.path.join(ctx, "folder"))
for name in ("a.txt", "b.txt"):
    with open(os.path.join(ctx, "folder", name), "w") as f:
        f.write(name)
os.symlink("a.txt", os.path.join(ctx, "folder", "link.txt"))
os.symlink("missing.txt", os.path.join(ctx, "folder", "dangling.txt"))
started = (Template(file_context_path=ctx).from_template("base")
           .copy("folder/*", "copied")  # several files: into a directory, as in E2B's test_build.py
           .run_cmd("pwd > built-in.txt")
           .set_workdir("/srv").set_start_cmd("echo up >> start.log; sleep infinity", wait_for_file("/srv/start.log")))
Template.build(started, "suite-start")
sb2 = Sandbox.create("suite-start", timeout=120)
out["start_procs"] = [p.tag for p in sb2.commands.list()]
for _ in range(100):  # the command starts with the sandbox; it may not have written yet
    log = sb2.commands.run("cat /srv/start.log").stdout
    if log.count("up") == 2:
        break
out["start_log"] = log
out["copied"] = sb2.commands.run("cd /home/user; cat built-in.txt; ls copied; cat copied/link.txt").stdout.split()
shutil.rmtree(ctx)
sb2.kill()
print(json.dumps(out))
