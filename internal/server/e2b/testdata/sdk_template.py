"""A template built with the e2b SDK's Template builder, unchanged: the
caller sets the E2B_* variables. Builds a template of a few steps (COPY,
ENV, WORKDIR, RUN), starts a sandbox from it, then asks for what msb
refuses (an image the cache lacks, a failing RUN, update_network of a
sandbox without a network). Prints
one JSON object of what it saw, which template_test.go checks."""
import json
import os

from e2b import Sandbox, Template, BuildException, SandboxException

here = os.path.dirname(os.path.abspath(__file__))
out = {"logs": []}

template = (
    Template(file_context_path=os.path.join(here, "template_ctx"))
    .from_template("base")
    .copy("app", "/opt/app")
    .copy("run.py", "/opt/tools/")
    .set_envs({"GREETING": "hi", "STAGE": "build"})
    .set_workdir("/opt/work")
    .run_cmd('echo "$GREETING from RUN in $(pwd)" > made.txt && echo step-output')
)
info = Template.build(template, "msb-test-tpl", on_build_logs=lambda e: out["logs"].append(e.message))
out["template_id"] = info.template_id
out["exists"] = Template.exists("msb-test-tpl")

sb = Sandbox.create("msb-test-tpl", timeout=120, envs={"STAGE": "run"})
out["run"] = sb.commands.run(
    'pwd; cat made.txt; cat /opt/app/greeting.txt; python3 /opt/tools/run.py; echo "$GREETING $STAGE"').stdout
try:
    sb.update_network({"allow_out": ["127.0.0.1"]})
    out["update_network"] = "accepted"
except SandboxException as e:
    out["update_network"] = str(e)
sb.kill()

# a second template on the first: config and files carry over
child = Template().from_template("msb-test-tpl").run_cmd("cat /opt/work/made.txt > child.txt")
Template.build(child, "msb-test-child")
sb = Sandbox.create("msb-test-child", timeout=120)
out["child"] = sb.commands.run("cat child.txt; echo $GREETING").stdout
sb.kill()

for name, tpl in [
    ("missing_image", Template().from_image("msb-test/never-imported:1").run_cmd("true")),
    ("failing_run", Template().from_template("base").run_cmd("echo about to fail; exit 3")),
]:
    try:
        Template.build(tpl, "msb-test-" + name.replace("_", "-"))
        out[name] = "built"
    except BuildException as e:
        out[name] = str(e)
print(json.dumps(out))
