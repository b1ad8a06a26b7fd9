"""``explain`` with tenant guarantees (issue 17): the guarantee rows hold only integer decisions,
so with them fixed they carry no dual (checked by explain's unread-row tracking); the note says
what each tenant is guaranteed and what the plan gives it, and the kept plans stay feasible."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from optnet import schema
from optnet.evaluate import evaluate
from optnet.explain import ExplainOptions, explain_plan
from optnet.instance import load_instance
from optnet.solve import SolveOptions, solve_instance

ROOT = Path(__file__).resolve().parent.parent


def test_tenant_guarantees_are_read():
    inst = load_instance(ROOT / "instances" / "tiny.yaml")
    jobs = tuple(replace(j, tenant="acme" if j.name == "infer" else "other") for j in inst.jobs)
    want = schema.Tenant(name="acme", min_lightpaths=2, min_hcf_lightpaths=2, min_ocs_ports=2)
    inst = replace(inst, jobs=jobs, tenants=(want,))
    d = solve_instance(inst, SolveOptions(mip_gap=1e-9, quiet=True)).decisions
    assert evaluate(inst, d).feasible
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="top"))
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]
    (note,) = [n for n in doc["notes"] if n.startswith("tenant acme")]
    infer = {s for j, ss in d.placement.items() if inst.jobs[j].name == "infer" for s in ss}
    mine = [lp for lp in d.lightpaths if {lp.server_a, lp.server_b} <= infer]
    assert re.search(rf"2 lightpaths \(the plan gives {len(mine)}\)", note), note
    assert len(mine) >= 2
    for job in doc["jobs"]:
        for c in job["candidates"]:
            if c["new_lightpaths"]:
                assert c["plan_job_saving_us"] is not None, c  # the evaluator found it feasible
    assert all(r["confirmed_status"] == "optimal" for r in doc["resources"])
