"""``explain`` with hybrid pairs (issue 17, docs/model.md §5.4): a pair striping over its
lightpaths and the packet fabric is attributed through ``pair_bandwidth_hybrid``, and one more
lightpath is priced at the striped rate, as the evaluator prices it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import solve_cli

from optnet import physics
from optnet.candidates import all_candidates
from optnet.explain import ExplainOptions, explain_plan, fixed_lp_sensitivities, load_plan
from optnet.model.data import MB

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "instances" / "tiny.yaml"


@pytest.fixture(scope="module")
def hybrid_results(tmp_path_factory) -> Path:
    """tiny.yaml with a 2:1 packet fabric on which pairs may stripe beside their lightpaths."""
    tmp = tmp_path_factory.mktemp("explain_hybrid")
    text = TINY.read_text(encoding="utf-8").replace(
        "  wavelengths_per_fibre: 2\n",
        "  wavelengths_per_fibre: 2\n"
        "  packet_fabric: {rate_gbps: 100, oversubscription: 2, hybrid: true}\n",
    )
    assert "hybrid: true" in text
    (tmp / "tiny-hybrid.yaml").write_text(text, encoding="utf-8")
    return solve_cli(tmp / "tiny-hybrid.yaml", tmp / "r.json")


def test_striped_pair_is_priced_at_the_striped_rate(hybrid_results):
    """train's pair stripes over 2 lightpaths and the packet fabric: its dual is on the hybrid
    row, and one more lightpath saves sens x (beta_both(2) - beta_both(3)), which is exactly
    what the evaluator gives on the kept plan (one pair, linear in beta)."""
    _res, inst, d = load_plan(hybrid_results)
    assert d.hybrid, "the plan should stripe a pair"
    cands = all_candidates(inst)
    _obj, job = fixed_lp_sensitivities(inst, cands, d, "max-iteration")
    striped = [p for p, v in job.beta_hyb.items() if v > 1e-9 and p[0] == 0]
    assert striped and all(job.beta.get(p, 0.0) == 0.0 for p in striped)
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    train = doc["jobs"][0]
    assert train["binding"]["pair_striped"] is True
    q = train["binding"]["pair_lightpaths"]
    sa, sb = (
        next(i for i, s in enumerate(inst.servers) if s.name == n) for n in train["binding"]["pair"]
    )
    ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
    (p,) = striped
    by_hand = (
        job.beta_hyb[p]
        * MB
        * (
            physics.hybrid_inverse_rate(inst, q, ra, rb)
            - physics.hybrid_inverse_rate(inst, q + 1, ra, rb)
        )
    )
    assert train["binding"]["one_more_lightpath_us"] == pytest.approx(by_hand, abs=1e-3)
    best = train["best"]
    assert best["predicted_job_saving_us"] == pytest.approx(by_hand, abs=1e-3)
    assert best["plan_job_saving_us"] == pytest.approx(by_hand, abs=1e-3)
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]
    for j in doc["jobs"]:
        for c in j["candidates"]:
            if c["plan_job_saving_us"] is not None:
                assert c["plan_job_saving_us"] <= c["predicted_job_saving_us"] + 1e-6, c
