"""msb.ray keeps a stored result only when a daemon says it stands for the
work: the rule is the daemon's (POST /v1/results/reusable), not a copy."""

from __future__ import annotations

import json
import os
import shutil

from msb.ray.eval import ClusterRun, Work


def test_kept_results_are_the_daemons_decision(client, demo, tmp_root):
    iid = demo.rows[0]["instance_id"]
    job = client.wait_job(client.submit_job("reuse", gold=True, instance_ids=[iid], workers=1).id, poll=0.05)
    assert job.state == "done", job.error
    out = os.path.join(tmp_root, "ray-reuse-out")
    stored_dir = os.path.join(out, "reuse", "gold", iid)
    shutil.copytree(os.path.join(job.out_dir, "gold", iid), stored_dir)
    run = ClusterRun(None, demo.dataset, "reuse", out)  # type: ignore[arg-type]  # _done needs no cluster
    work = Work(iid, ["gold"], gold=True)
    assert run._done(client, work)
    path = os.path.join(stored_dir, "result.json")
    with open(path, encoding="utf-8") as f:
        stored = json.load(f)
    # Each of these the daemon refuses to resume from, so the driver must too.
    for key, value in (("network", "host"), ("instance_id", "other__repo-1"), ("spec_digest", "sha256:0"),
                       ("patch_digest", "sha256:0"), ("outcome", "infra_error")):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**stored, key: value}, f)
        assert not run._done(client, work), key


def test_result_dirs_are_the_daemons(client, demo, tmp_root):
    """Where a run keeps a model's results the daemon says (Reuse.dirs):
    the driver does not spell model names as directories itself."""
    iid = demo.rows[0]["instance_id"]
    run = ClusterRun(None, demo.dataset, "reuse-dirs", os.path.join(tmp_root, "ray-dirs-out"))  # type: ignore[arg-type]
    pred = {"instance_id": iid, "model_name_or_path": "org/model", "model_patch": "diff --git a/x b/x\n"}
    work = Work(iid, ["org/model"], prediction=pred)
    assert not run._done(client, work)  # nothing stored
    assert work.dirs == {"org/model": f"org__model/{iid}"}
    validation = ClusterRun(None, demo.dataset, "reuse-dirs", run.out, kind="validation")  # type: ignore[arg-type]
    both = Work(iid, ["gold", "empty"])
    assert not validation._done(client, both)
    assert both.dirs == {"gold": f"gold/{iid}", "empty": f"empty/{iid}"}
