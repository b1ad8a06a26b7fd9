"""Tests for optnet.shorthand against hand-computed closed forms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from optnet.shorthand import (
    COLLECTIVE_KINDS,
    GROUPS,
    MIB,
    TransformerSpec,
    default_compression_ratio,
    derive,
    flops_per_iteration,
    microbatches,
    moe_layers_per_stage,
    pp_p2p_count,
)

# GPT-3 175B (Brown et al. 2020, Table 2.1; global batch 1536 as in Megatron-LM's
# examples/gpt3/train_gpt3_175b_distributed.sh).
GPT3 = dict(layers=96, hidden=12288, heads=96, seq_len=2048, vocab=50257, global_batch=1536)


def gpt3(**kw) -> TransformerSpec:
    return TransformerSpec(**{**GPT3, **kw})


def small(**kw) -> TransformerSpec:
    base = dict(layers=8, hidden=1024, heads=16, seq_len=512, global_batch=64)
    return TransformerSpec(**{**base, **kw})


def by_name(colls: list[dict]) -> dict[str, dict]:
    return {c["name"]: c for c in colls}


# Bytes each rank moves per unit of message_bytes for bandwidth-optimal algorithms, dropping the
# common (p - 1)/p factor (MPICH ring/Rabenseifner rows): all-reduce 2, all-gather and
# reduce-scatter 1. This is the "volume" the ZeRO paper compares.
WIRE_FACTOR = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0}


def dp_volume(colls: list[dict]) -> float:
    return sum(
        WIRE_FACTOR[c["kind"]] * c["message_bytes"] * c["count"]
        for c in colls
        if c["group"] == "dp"
    )


# --------------------------------------------------------------------------------------- FLOPs


def test_gpt3_flops_per_iteration_matches_research_note():
    f = flops_per_iteration(gpt3())
    assert f == pytest.approx(3.39e18, rel=0.01)
    b, s, n_layers, h, v = 1536, 2048, 96, 12288, 50257
    closed = 72 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (12 * n_layers * h))
    assert f == pytest.approx(closed, rel=1e-12)


def test_recompute_flops_is_narayanan_eq3():
    b, s, n_layers, h, v = 1536, 2048, 96, 12288, 50257
    f = flops_per_iteration(gpt3(recompute=True))
    eq3 = 96 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (16 * n_layers * h))
    assert f == pytest.approx(eq3, rel=1e-12)
    assert f == pytest.approx(4.51e18, rel=0.01)
    # Layers x 4/3, logits unchanged.
    plain = flops_per_iteration(gpt3())
    logits = 6 * b * s * h * v
    assert f == pytest.approx((plain - logits) * 4 / 3 + logits, rel=1e-12)


def test_general_ffn_flops():
    spec = small(ffn_hidden=2816)
    b, s, n_layers, h, f, v = 64, 512, 8, 1024, 2816, 50257
    expected = 12 * b * s * n_layers * h * h * (2 + s / h + f / h) + 6 * b * s * h * v
    assert flops_per_iteration(spec) == pytest.approx(expected, rel=1e-12)


def test_default_params():
    assert gpt3().param_count == 12 * 96 * 12288**2 + 50257 * 12288
    assert gpt3(params=175e9).param_count == 175e9
    spec = small(ffn_hidden=2048)
    assert spec.param_count == 8 * (4 * 1024**2 + 2 * 1024 * 2048) + 50257 * 1024


def test_compute_time_with_bubble():
    spec = gpt3()
    t, _ = derive(spec, tp=8, pp=8, dp=16)
    m = 1536 // 16
    ideal_us = flops_per_iteration(spec) / (1024 * 989.4e12 * 0.45) * 1e6
    assert t == pytest.approx(ideal_us * (1 + 7 / m), rel=1e-12)
    assert t / 1e6 == pytest.approx(7.97, rel=0.01)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_bubble_fraction_same_for_both_schedules(schedule):
    spec = small(pipeline_schedule=schedule)
    t1, _ = derive(spec, tp=1, pp=1, dp=2)
    t4, _ = derive(spec, tp=1, pp=4, dp=2)  # 4x the GPUs, m = 32
    assert t4 / (t1 / 4) == pytest.approx(1 + 3 / 32, rel=1e-12)


# ------------------------------------------------------------------------------ tensor / pipe


def test_tp_message_is_48_mib_for_gpt3():
    _, colls = derive(gpt3(), tp=8, pp=8, dp=16)
    tp = by_name(colls)["tp_allreduce"]
    assert tp["kind"] == "all_reduce" and tp["group"] == "tp" and tp["overlap"] == 0.0
    assert tp["message_bytes"] == 48 * MIB
    m = 96
    assert tp["count"] == 4 * (96 // 8) * (m + 8 - 1)


def test_tp_count_with_recompute_and_no_pipeline():
    _, colls = derive(small(recompute=True), tp=2, pp=1, dp=2)
    assert by_name(colls)["tp_allreduce"]["count"] == 6 * 8 * 32


def test_pp_message_is_sharded_over_tp():
    _, colls = derive(gpt3(), tp=8, pp=8, dp=16)
    pp = by_name(colls)["pp_sendrecv"]
    assert pp["kind"] == "send_recv" and pp["group"] == "pp" and pp["overlap"] == 0.0
    assert pp["message_bytes"] == 48 * MIB / 8
    assert pp["count"] == 2 * (96 + 8 - 2) - 1


def test_pp_counts_closed_form():
    assert pp_p2p_count(1, 10, "1f1b") == 0
    assert pp_p2p_count(4, 8, "gpipe") == 20
    assert pp_p2p_count(4, 8, "1f1b") == 19
    assert pp_p2p_count(2, 8, "1f1b") == 9
    assert pp_p2p_count(4, 1, "1f1b") == pp_p2p_count(4, 1, "gpipe") == 6
    with pytest.raises(ValueError):
        pp_p2p_count(2, 2, "interleaved")


def _simulate(ops: list[list[tuple]], c: float) -> float:
    """Rendezvous simulation: compute ops take their duration; an exchange op starts when every
    partner stage has posted the matching op and takes c (its messages move in parallel)."""
    where: dict[tuple, dict[str, tuple[int, int]]] = {}
    for i, stage in enumerate(ops):
        for k, op in enumerate(stage):
            if op[0] == "X":
                for msg in op[1]:
                    where.setdefault(msg, {})["s"] = (i, k)
                for msg in op[2]:
                    where.setdefault(msg, {})["r"] = (i, k)
    end = [[0.0] * len(stage) for stage in ops]

    def post(i: int, k: int) -> float:
        return end[i][k - 1] if k else 0.0

    changed = True
    while changed:
        changed = False
        for i, stage in enumerate(ops):
            for k, op in enumerate(stage):
                if op[0] == "C":
                    e = post(i, k) + op[1]
                else:
                    e = post(i, k)
                    for msg in op[1] + op[2]:
                        e = max(e, max(post(*where[msg]["s"]), post(*where[msg]["r"])) + c)
                if e > end[i][k] + 1e-12:
                    end[i][k], changed = e, True
    return max(max(row) for row in end)


def _schedule(p: int, m: int, kind: str, tf: float, tb: float) -> list[list[tuple]]:
    ops = []
    for i in range(p):
        first, last, stage = i == 0, i == p - 1, []

        def x(sends, recvs, stage=stage):
            if sends or recvs:
                stage.append(("X", sends, recvs))

        def rf(j, i=i, first=first):
            return [] if first else [("F", i - 1, j)]

        def sf(j, i=i, last=last):
            return [] if last else [("F", i, j)]

        def rb(j, i=i, last=last):
            return [] if last else [("B", i + 1, j)]

        def sb(j, i=i, first=first):
            return [] if first else [("B", i, j)]

        if kind == "gpipe":  # all forwards, then all backwards; batched send/recv per step
            x([], rf(0))
            for j in range(m):
                stage.append(("C", tf))
                x(sf(j), rf(j + 1) if j < m - 1 else [])
            x([], rb(0))
            for j in range(m):
                stage.append(("C", tb))
                x(sb(j), rb(j + 1) if j < m - 1 else [])
        else:  # Megatron forward_backward_pipelining_without_interleaving
            warm = min(p - i - 1, m)
            fj = bj = 0
            for _ in range(warm):
                x([], rf(fj))
                stage.append(("C", tf))
                x(sf(fj), [])
                fj += 1
            if m - warm > 0:
                x([], rf(fj))
            for k in range(m - warm):
                stage.append(("C", tf))
                x(sf(fj), rb(bj))
                fj += 1
                stage.append(("C", tb))
                x(sb(bj), rf(fj) if k < m - warm - 1 else [])
                bj += 1
            for _ in range(warm):
                x([], rb(bj))
                stage.append(("C", tb))
                x(sb(bj), [])
                bj += 1
        ops.append(stage)
    return ops


@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", [2, 3, 4, 6])
@pytest.mark.parametrize("m", [1, 2, 3, 5, 9])
def test_pp_count_matches_rendezvous_simulation(kind, p, m):
    tf, tb, c = 1.0, 2.0, 1e-3
    makespan = _simulate(_schedule(p, m, kind, tf, tb), c)
    exchanges = (makespan - (m + p - 1) * (tf + tb)) / c
    assert exchanges == pytest.approx(pp_p2p_count(p, m, kind), abs=1e-6)


# ---------------------------------------------------------------------------------- data par


def test_ddp_bucket_count_gpt3():
    _, colls = derive(gpt3(), tp=8, pp=8, dp=16)
    g = by_name(colls)["dp_grad"]
    grad = (12 * 96 * 12288**2 + 50257 * 12288) / 64 * 2
    n = math.ceil(grad / (25 * MIB))
    assert n == 209
    assert g["kind"] == "all_reduce" and g["group"] == "dp"
    assert g["count"] == n
    assert g["message_bytes"] == pytest.approx(grad / n)
    assert g["message_bytes"] <= 25 * MIB
    assert "dp_param_allgather" not in by_name(colls)


def test_ddp_small_model_single_bucket_and_overlap():
    spec = small(params=1e6, overlap_grad_sync=0.7, bucket_mb=64)
    _, colls = derive(spec, tp=1, pp=1, dp=4)
    g = by_name(colls)["dp_grad"]
    assert g["count"] == 1 and g["message_bytes"] == 2e6 and g["overlap"] == 0.7


@pytest.mark.parametrize(
    ("mode", "ratio"), [("ddp", 1.0), ("zero1", 1.0), ("zero2", 1.0), ("zero3", 1.5)]
)
def test_zero_volume_ratio_vs_ddp(mode, ratio):
    # m = 1 (no gradient accumulation), the setting of Rajbhandari et al. section 7.
    kw = dict(global_batch=8, micro_batch=1)
    _, ddp = derive(gpt3(**kw), tp=8, pp=1, dp=8)
    _, zero = derive(gpt3(data_parallel=mode, **kw), tp=8, pp=1, dp=8)
    assert dp_volume(zero) / dp_volume(ddp) == pytest.approx(ratio, rel=1e-12)


def test_zero_collectives_and_counts():
    spec = small(overlap_grad_sync=0.5, overlap_param_gather=0.25)
    grad = spec.param_count * 2
    m = 64 // 4
    for mode, rs_count, ag_count in (("zero1", 1, 1), ("zero2", m, 1), ("zero3", m, 2 * m)):
        _, colls = derive(spec.model_copy(update={"data_parallel": mode}), tp=1, pp=1, dp=4)
        d = by_name(colls)
        assert d["dp_grad"]["kind"] == "reduce_scatter"
        assert d["dp_grad"]["message_bytes"] == grad and d["dp_grad"]["count"] == rs_count
        assert d["dp_grad"]["overlap"] == 0.5
        assert d["dp_param_allgather"]["kind"] == "all_gather"
        assert d["dp_param_allgather"]["message_bytes"] == grad
        assert d["dp_param_allgather"]["count"] == ag_count
        assert d["dp_param_allgather"]["overlap"] == 0.25


def test_parameter_server_is_push_reduce_scatter_pull_all_gather():
    kw = dict(global_batch=8)
    _, ddp = derive(gpt3(**kw), tp=8, pp=1, dp=8)
    _, ps = derive(gpt3(data_parallel="parameter_server", **kw), tp=8, pp=1, dp=8)
    d = by_name(ps)
    assert (d["dp_grad"]["kind"], d["dp_grad"]["count"]) == ("reduce_scatter", 1)
    assert (d["dp_param_allgather"]["kind"], d["dp_param_allgather"]["count"]) == ("all_gather", 1)
    assert dp_volume(ps) == pytest.approx(dp_volume(ddp), rel=1e-12)


# ------------------------------------------------------------------------------- compression


@pytest.mark.parametrize("mode", ["ddp", "zero1", "zero3", "parameter_server"])
@pytest.mark.parametrize("method", ["qsgd", "dgc"])
def test_compression_divides_grad_bytes_and_adds_codec_time(mode, method):
    plain = small(data_parallel=mode)
    comp = small(data_parallel=mode, compression=method, compression_ratio=10.0)
    t0, c0 = derive(plain, tp=1, pp=2, dp=4)
    t1, c1 = derive(comp, tp=1, pp=2, dp=4)
    g0, g1 = by_name(c0)["dp_grad"], by_name(c1)["dp_grad"]
    assert g1["message_bytes"] == pytest.approx(g0["message_bytes"] / 10.0)
    assert g1["count"] == g0["count"]
    # Everything except dp_grad is unchanged.
    assert [c for c in c0 if c["name"] != "dp_grad"] == [c for c in c1 if c["name"] != "dp_grad"]
    codec_us = g0["message_bytes"] * g0["count"] / 100e9 * 1e6
    assert t1 - t0 == pytest.approx(codec_us, rel=1e-9)


def test_default_compression_ratios():
    assert default_compression_ratio("qsgd", 2) == pytest.approx(16 / (4 + 32 / 512))
    assert default_compression_ratio("qsgd", 4) == pytest.approx(32 / (4 + 32 / 512))
    assert default_compression_ratio("dgc", 2) == pytest.approx(16 / (0.001 * 48))
    assert default_compression_ratio("dgc", 4) == pytest.approx(500.0)
    assert small(compression="dgc").effective_compression_ratio == pytest.approx(333.333, rel=1e-5)
    assert small().effective_compression_ratio == 1.0


def test_compression_ratio_without_compression_rejected():
    with pytest.raises(ValidationError):
        small(compression_ratio=4.0)


# ------------------------------------------------------------------------------------- MoE


def test_moe_alltoall():
    spec = small(moe_layer_interval=2)
    _, colls = derive(spec, tp=1, pp=2, dp=8, ep=4)
    a = by_name(colls)["ep_alltoall"]
    m = 64 // 8
    assert a["kind"] == "all_to_all" and a["group"] == "ep" and a["overlap"] == 0.0
    assert a["message_bytes"] == 1 * 512 * 1024 * 2
    assert a["count"] == 4 * 2 * (m + 2 - 1)  # 4 layers per stage, 2 of them MoE


def test_moe_layers_per_stage():
    assert moe_layers_per_stage(8, 2, 2) == 2
    assert moe_layers_per_stage(6, 2, 2) == 2  # layers 1-3 hold {2}, layers 4-6 hold {4, 6}
    assert moe_layers_per_stage(8, 1, 1) == 8
    assert moe_layers_per_stage(4, 4, 2) == 1


def test_moe_without_moe_layer_rejected():
    with pytest.raises(ValueError, match="MoE"):
        derive(small(layers=1, moe_layer_interval=2), tp=1, pp=1, dp=2, ep=2)


# --------------------------------------------------------------------------- shape checks


def test_groups_of_size_one_vanish():
    t, colls = derive(small(), tp=1, pp=1, dp=1)
    assert colls == [] and t > 0
    _, colls = derive(small(), tp=2, pp=1, dp=1)
    assert [c["name"] for c in colls] == ["tp_allreduce"]
    _, colls = derive(small(), tp=1, pp=2, dp=1)
    assert [c["name"] for c in colls] == ["pp_sendrecv"]
    _, colls = derive(small(compression="qsgd"), tp=1, pp=1, dp=2)
    assert [c["name"] for c in colls] == ["dp_grad"]


@pytest.mark.parametrize(
    ("kw", "layout", "match"),
    [
        ({}, dict(tp=1, pp=3, dp=1), "layers"),
        ({}, dict(tp=1, pp=1, dp=3), "global_batch"),
        ({"micro_batch": 3}, dict(tp=1, pp=1, dp=1), "global_batch"),
        ({}, dict(tp=1, pp=1, dp=4, ep=3), "ep"),
        ({}, dict(tp=32, pp=1, dp=1), "heads"),
        ({}, dict(tp=0, pp=1, dp=1), "tp"),
        ({}, dict(tp=1, pp=1, dp=2.0), "dp"),
    ],
)
def test_invalid_layouts_raise(kw, layout, match):
    with pytest.raises(ValueError, match=match):
        derive(small(**kw), **layout)


@pytest.mark.parametrize(
    "kw",
    [
        dict(hidden=1000, heads=16),
        dict(mfu=0.0),
        dict(mfu=1.5),
        dict(layers=0),
        dict(overlap_grad_sync=1.5),
        dict(data_parallel="fsdp"),
        dict(unknown_field=1),
    ],
)
def test_invalid_specs_raise(kw):
    with pytest.raises(ValueError):
        small(**kw)


def test_microbatches():
    assert microbatches(gpt3(), 16) == 96
    with pytest.raises(ValueError):
        microbatches(gpt3(), 7)


def test_spec_is_frozen():
    spec = small()
    with pytest.raises(ValidationError):
        spec.layers = 4


# ------------------------------------------------------------------------------- property


@st.composite
def shapes(draw):
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 3, 4]))
    ep = draw(st.sampled_from([1, 2, 4]))
    dp = ep * draw(st.integers(1, 4))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    heads = tp * draw(st.integers(1, 8))
    layers = pp * draw(st.integers(1, 6))
    micro = draw(st.integers(1, 4))
    m = draw(st.integers(1, 64))
    interval = draw(st.integers(1, min(layers, 3)))
    spec = TransformerSpec(
        layers=layers,
        hidden=heads * head_dim,
        heads=heads,
        seq_len=draw(st.sampled_from([128, 1024, 4096])),
        vocab=draw(st.integers(1000, 200_000)),
        global_batch=micro * dp * m,
        micro_batch=micro,
        bytes_per_param=draw(st.sampled_from([1, 2, 4])),
        mfu=draw(st.floats(0.05, 1.0)),
        recompute=draw(st.booleans()),
        data_parallel=draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3", "parameter_server"])),
        bucket_mb=draw(st.floats(0.5, 512)),
        overlap_grad_sync=draw(st.floats(0, 1)),
        pipeline_schedule=draw(st.sampled_from(["gpipe", "1f1b"])),
        compression=draw(st.sampled_from(["none", "qsgd", "dgc"])),
        moe_layer_interval=interval,
    )
    return spec, tp, pp, dp, ep


@settings(max_examples=300, deadline=None)
@given(shapes())
def test_property_outputs_finite_positive_unique(case):
    spec, tp, pp, dp, ep = case
    t, colls = derive(spec, tp=tp, pp=pp, dp=dp, ep=ep)
    assert math.isfinite(t) and t > 0
    names = [c["name"] for c in colls]
    assert len(names) == len(set(names))
    sizes = {"tp": tp, "pp": pp, "dp": dp, "ep": ep}
    for c in colls:
        assert set(c) == {"name", "kind", "group", "message_bytes", "count", "overlap"}
        assert c["kind"] in COLLECTIVE_KINDS and c["group"] in GROUPS
        assert sizes[c["group"]] > 1
        assert math.isfinite(c["message_bytes"]) and c["message_bytes"] > 0
        assert isinstance(c["count"], int) and c["count"] >= 1
        assert 0.0 <= c["overlap"] <= 1.0
    present = {c["group"] for c in colls}
    for g, size in sizes.items():
        assert (g in present) == (size > 1), (g, size, names)


# ------------------------------------------- GQA, SwiGLU, untied embeddings, SP, CP, top-k MoE


def test_gqa_swiglu_untied_params_and_flops_by_hand():
    # Llama-2 7B shape (Touvron et al. 2023, Table 1 / HF config): L 32, h 4096, 32 heads, f 11008,
    # V 32000, untied embeddings, SwiGLU; MHA (kv_heads = heads) in the 7B model.
    spec = TransformerSpec(
        layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000, seq_len=4096,
        global_batch=8, gated_mlp=True, tie_embeddings=False,
    )  # fmt: skip
    h, f, v, n_layers = 4096, 11008, 32000, 32
    by_hand = n_layers * (4 * h * h + 3 * h * f) + 2 * v * h
    assert spec.param_count == by_hand == 6_738_149_376  # norms ignored (65 x 4096 more)
    # Now 8 K/V heads (GQA): K and V shrink from h x h to h x (8 * 128) each.
    gqa = spec.model_copy(update={"kv_heads": 8})
    assert gqa.param_count == by_hand - n_layers * 2 * h * (h - 8 * 128)
    b, s = 8, 4096
    flops = 12 * b * s * n_layers * h * h * (1 + 8 / 32 + s / h) + 18 * b * s * h * f * n_layers
    flops += 6 * b * s * h * v
    assert flops_per_iteration(gqa) == pytest.approx(flops, rel=1e-12)


def test_legacy_spec_outputs_are_bit_identical_under_the_generalised_formulas():
    # A plain spec must not change: flops equal the original closed form exactly.
    b, s, n_layers, h, f, v = 64, 512, 8, 1024, 4096, 50257
    legacy = 12.0 * b * s * n_layers * h * h * (2.0 + s / h + f / h) + 6.0 * b * s * h * v
    assert flops_per_iteration(small()) == legacy
    assert small().param_count == float(n_layers * (4 * h * h + 2 * h * f) + v * h)


def test_sequence_parallel_replaces_each_allreduce_by_rs_plus_ag_of_the_same_vector():
    plain = by_name(derive(small(), tp=4, pp=2, dp=2)[1])
    sp = by_name(derive(small(sequence_parallel=True), tp=4, pp=2, dp=2)[1])
    assert "tp_allreduce" not in sp
    ar = plain["tp_allreduce"]
    m = 64 // 2
    for name, kind in (("tp_allgather", "all_gather"), ("tp_reducescatter", "reduce_scatter")):
        c = sp[name]
        assert c["kind"] == kind and c["group"] == "tp"
        assert c["message_bytes"] == 1 * 512 * 1024 * 2 == ar["message_bytes"]
        assert c["count"] == 4 * (8 // 2) * (m + 2 - 1) == ar["count"]
    # Volume: AR moves 2x its vector, AG and RS 1x each (the WIRE_FACTOR above): equal totals.
    vol = sum(WIRE_FACTOR[c["kind"]] * c["message_bytes"] * c["count"] for c in sp.values()
              if c["group"] == "tp")  # fmt: skip
    assert vol == WIRE_FACTOR["all_reduce"] * ar["message_bytes"] * ar["count"]
    assert sp["pp_sendrecv"] == plain["pp_sendrecv"]


def test_context_parallel_kv_exchange_by_hand():
    spec = small(kv_heads=4, recompute=True, overlap_cp=0.5)
    t1, _ = derive(spec, tp=2, pp=1, dp=2, cp=1)
    t2, colls = derive(spec, tp=2, pp=1, dp=2, cp=4)
    c = by_name(colls)
    m = 64 // (1 * 2)  # cp does not divide the batch: m = B / (b dp)
    d = 1024 // 16
    kv = 2 * 1 * 512 * (4 // 2) * d * 2  # K and V, whole sequence, 2 of 4 K/V heads per tp rank
    ag, rs = c["cp_kv_allgather"], c["cp_dkv_reducescatter"]
    assert (ag["kind"], ag["group"], rs["kind"], rs["group"]) == (
        "all_gather", "cp", "reduce_scatter", "cp",
    )  # fmt: skip
    assert ag["message_bytes"] == rs["message_bytes"] == kv
    assert ag["count"] == (2 + 1) * 8 * m  # forward, backward re-exchange, recomputed forward
    assert rs["count"] == 8 * m
    assert ag["overlap"] == rs["overlap"] == 0.5
    # tp activations hold s / cp tokens; gradients are reduced over dp x cp.
    assert c["tp_allreduce"]["message_bytes"] == 1 * (512 // 4) * 1024 * 2
    assert c["dp_grad"]["group"] == "dp_cp"
    assert t2 == pytest.approx(t1 / 4, rel=1e-12)  # 4x the GPUs, same FLOPs and m
    ag_only = by_name(derive(spec.model_copy(update={"cp_comm": "all_gather"}), 2, 1, 2, cp=4)[1])
    assert ag_only["cp_kv_allgather"]["overlap"] == 0.0  # Megatron: all_gather is not async


def test_topk_moe_alltoall_and_expert_gradients_by_hand():
    # 8 layers all MoE, 8 experts, top-2, capacity 1.25, tp 2 with SP, ep 4 over dp 8, ZeRO-1.
    spec = small(
        num_experts=8, moe_top_k=2, moe_capacity_factor=1.25, moe_layer_interval=1,
        sequence_parallel=True, data_parallel="zero1", grad_bytes_per_param=4,
    )  # fmt: skip
    _, colls = derive(spec, tp=2, pp=1, dp=8, ep=4)
    c = by_name(colls)
    m = 64 // 8
    tokens = 1 * 512
    a2a = tokens / 2 * 1024 * 2 * 2 * 1.25  # s/tp tokens (SP), h, bf16, k = 2, capacity 1.25
    assert c["ep_alltoall"]["message_bytes"] == a2a
    assert c["ep_alltoall"]["count"] == 4 * 8 * m
    assert c["ep_tp_allgather"]["message_bytes"] == tokens * 1024 * 2 * 2 * 1.25
    assert c["ep_tp_allgather"]["count"] == c["ep_tp_reducescatter"]["count"] == 2 * 8 * m
    h, f = 1024, 4096
    dense = 8 * 4 * h * h + 50257 * h
    expert_rank = 8 * (8 // 4) * 2 * h * f  # 2 experts per EP rank in each of 8 layers
    assert c["dp_grad"]["group"] == "dp" and c["dp_grad"]["kind"] == "reduce_scatter"
    assert c["dp_grad"]["message_bytes"] == dense / 2 * 4  # over tp, fp32 gradients
    assert c["dp_param_allgather"]["message_bytes"] == dense / 2 * 2
    assert c["dp_grad_expert"]["group"] == "edp"
    assert c["dp_grad_expert"]["message_bytes"] == expert_rank / 2 * 4
    assert spec.param_count == dense + 8 * 8 * 2 * h * f
    # FLOPs: MLP counted k = 2 times.
    plain = flops_per_iteration(small())
    mlp = 12.0 * 64 * 512 * h * f * 8
    assert flops_per_iteration(spec) == pytest.approx(plain + mlp, rel=1e-12)
    # ep = dp: no expert data parallelism left, no expert gradient collective.
    assert "dp_grad_expert" not in by_name(derive(spec.model_copy(update={"num_experts": 8}),
                                                  2, 1, 8, ep=8)[1])  # fmt: skip


@pytest.mark.parametrize(
    ("kw", "layout", "match"),
    [
        (dict(kv_heads=2), dict(tp=4, pp=1, dp=1), "kv_heads"),
        ({}, dict(tp=1, pp=1, dp=2, cp=3), "seq_len"),
        (dict(num_experts=6, moe_layer_interval=1), dict(tp=1, pp=1, dp=4, ep=4), "num_experts"),
        (dict(num_experts=8), dict(tp=2, pp=1, dp=4, ep=4), "sequence_parallel"),
        ({}, dict(tp=1, pp=1, dp=2, ep=4, cp=3), "dp \\* cp"),
    ],
)
def test_new_invalid_layouts_raise(kw, layout, match):
    with pytest.raises(ValueError, match=match):
        derive(small(**kw), **layout)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kv_heads=3),
        dict(moe_top_k=2),
        dict(num_experts=2, moe_top_k=3),
        dict(num_experts=2, params=1e9),
        dict(cp_comm="a2a"),
    ],
)
def test_new_invalid_specs_raise(kw):
    with pytest.raises(ValueError):
        small(**kw)
