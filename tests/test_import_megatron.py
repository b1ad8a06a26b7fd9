"""``optnet import megatron`` and the Megatron-LM rank layout.

Collective sizes are computed by hand below, with the arithmetic written out, independent of
optnet.shorthand; shapes: Llama-3 70B (Llama Team, "The Llama 3 Herd of Models", 2024, Table 3:
80 layers, model dimension 8192, FFN 28672, 64 heads, 8 key/value heads, vocabulary 128,000 tokens
listed as 128256 in the released config) and Mixtral 8x7B (Jiang et al., "Mixtral of Experts",
2024, Table 1: dim 4096, 32 layers, head_dim 128, hidden_dim 14336, 32 heads, 8 kv heads, 8
experts, top-2, vocab 32000).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from optnet.candidates import all_candidates, rank_groups
from optnet.cli import main
from optnet.importers.megatron import (
    MegatronArgsError,
    load_args_file,
    padded_vocab,
    parse_args,
    to_workload,
)
from optnet.instance import JobSpec, load_instance

# ------------------------------------------- Megatron-LM RankGenerator, transcribed
# From megatron/core/parallel_state.py (NVIDIA/Megatron-LM): generate_masked_orthogonal_rank_groups
# and RankGenerator.get_ranks; the decoder generator is built with ep = 1 and order
# "tp-cp-ep-dp-pp", the expert generator with cp = 1, tp = expert tp (default tp), dp = expert dp
# = world / (tp * ep * pp) and the same order.


def _prefix_product(a, init=1):
    r = [init]
    for v in a:
        init = init * v
        r.append(init)
    return r


def _decompose(index, shape):
    stride = _prefix_product(shape)
    return [(index // d) % s for s, d in zip(shape, stride, strict=False)]


def megatron_groups(world, parallel_size, mask):
    masked_shape = [s for s, m in zip(parallel_size, mask, strict=True) if m]
    unmasked_shape = [s for s, m in zip(parallel_size, mask, strict=True) if not m]
    global_stride = _prefix_product(parallel_size)
    masked_stride = [d for d, m in zip(global_stride, mask, strict=False) if m]
    unmasked_stride = [d for d, m in zip(global_stride, mask, strict=False) if not m]
    group_size = _prefix_product(masked_shape)[-1]
    ranks = []
    for group_index in range(world // group_size):
        gidx = _decompose(group_index, unmasked_shape)
        rank = []
        for rank_in_group in range(group_size):
            ridx = _decompose(rank_in_group, masked_shape)
            rank.append(
                sum(x * y for x, y in zip(ridx, masked_stride, strict=False))
                + sum(x * y for x, y in zip(gidx, unmasked_stride, strict=False))
            )
        ranks.append(rank)
    return ranks


def megatron_get_ranks(sizes: dict[str, int], token: str, order: str = "tp-cp-ep-dp-pp"):
    names = order.split("-")
    world = 1
    for n in names:
        world *= sizes[n]
    mask = [n in token.split("-") for n in names]
    return megatron_groups(world, [sizes[n] for n in names], mask)


def job(tp, cp, dp, pp, ep) -> JobSpec:
    return JobSpec("j", tp * cp * dp * pp, tp, pp, dp, ep, 1.0, 1.0, (), 1, cp=cp)


def canon(groups):
    return sorted(tuple(g) for g in groups)


LAYOUTS = [
    (2, 1, 4, 1, 1),
    (2, 2, 2, 2, 1),
    (8, 2, 1, 4, 1),
    (2, 1, 32, 1, 8),  # the Mixtral layout below
    (2, 2, 4, 2, 4),  # ep over dp x cp
    (1, 4, 2, 1, 2),
    (4, 3, 2, 2, 3),
]


@pytest.mark.parametrize(("tp", "cp", "dp", "pp", "ep"), LAYOUTS)
def test_rank_groups_match_megatron_rank_generator(tp, cp, dp, pp, ep):
    j = job(tp, cp, dp, pp, ep)
    dense = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    for ours, token in (("tp", "tp"), ("cp", "cp"), ("dp", "dp"), ("dp_cp", "dp-cp"), ("pp", "pp")):
        assert canon(rank_groups(j, ours)) == canon(megatron_get_ranks(dense, token)), ours
    expert = {"tp": tp, "cp": 1, "ep": ep, "dp": tp * cp * dp * pp // (tp * ep * pp), "pp": pp}
    assert canon(rank_groups(j, "ep")) == canon(megatron_get_ranks(expert, "ep"))
    assert canon(rank_groups(j, "edp")) == canon(megatron_get_ranks(expert, "dp"))
    # Megatron asserts the two generators agree on pp; so do we.
    assert canon(megatron_get_ranks(expert, "pp")) == canon(rank_groups(j, "pp"))
    world = list(itertools.chain.from_iterable(rank_groups(j, "tp")))
    assert sorted(world) == list(range(j.gpus))


def test_rank_groups_without_cp_are_the_old_layout():
    # rank = t + tp * (d + dp * s) as before cp existed, group for group and in the same order.
    tp, dp, pp, ep = 2, 4, 3, 2
    j = job(tp, 1, dp, pp, ep)
    r = lambda t, d, s: t + tp * (d + dp * s)  # noqa: E731
    assert rank_groups(j, "tp") == [
        [r(t, d, s) for t in range(tp)] for s in range(3) for d in range(4)
    ]
    assert rank_groups(j, "dp") == [
        [r(t, d, s) for d in range(dp)] for s in range(3) for t in range(2)
    ]
    assert rank_groups(j, "pp") == [
        [r(t, d, s) for s in range(pp)] for d in range(4) for t in range(2)
    ]
    ep_groups = [[r(t, e * ep + i, s) for i in range(ep)] for s in range(3) for t in range(2)
                 for e in range(2)]  # fmt: skip
    assert rank_groups(j, "ep") == ep_groups


# ------------------------------------------------------------------ Llama-3 70B, by hand

LLAMA3_70B = (  # noqa: SIM905 - the command line as users write it
    "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
    "--group-query-attention --num-query-groups 8 --swiglu --seq-length 8192 "
    "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 32 "
    "--vocab-size 128256 --untie-embeddings-and-output-weights --bf16 "
    "--use-distributed-optimizer --sequence-parallel --position-embedding-type rope "
    "--normalization RMSNorm --lr 1.5e-4 --tensor-model-parallel-size 8"
).split()


def colls_of(workload: dict) -> dict[str, dict]:
    (j,) = workload["jobs"]
    return {c["name"]: c for c in j["collectives"]}


def test_llama3_70b_tp8_pp4_dp2_by_hand():
    args = parse_args([*LLAMA3_70B, "--pipeline-model-parallel-size", "4"])
    wl = to_workload(args, gpus=64, expand=True)
    (j,) = wl["jobs"]
    assert j["parallelism"] == {"tp": 8, "pp": 4, "dp": 2}
    c = colls_of(wl)
    assert set(c) == {"tp_allgather", "tp_reducescatter", "pp_sendrecv", "dp_grad",
                      "dp_param_allgather"}  # fmt: skip
    # m = 32 / (1 * 2) = 16 micro-batches; 1F1B critical path m + pp - 1 = 19 slots.
    # Sequence parallel: per layer 2 AG + 2 RS forward, 2 RS + 2 AG backward, of b s h bf16.
    act = 1 * 8192 * 8192 * 2
    assert act == 134_217_728
    for name in ("tp_allgather", "tp_reducescatter"):
        assert c[name]["message_bytes"] == act
        assert c[name]["count"] == 4 * (80 // 4) * 19 == 1520
    # Stage boundary: one tp slice, 1F1B with pp 4, m 16: 2 (16 + 4 - 2) - 1 = 35 exchanges.
    assert c["pp_sendrecv"]["message_bytes"] == act / 8 == 16_777_216
    assert c["pp_sendrecv"]["count"] == 35
    # Parameters: vocab padded to a multiple of 128 x tp = 1024: ceil(128256 / 1024) = 126.
    v = 126 * 1024
    assert v == 129_024
    attn = 2 * 8192 * 8192 + 2 * 8192 * (8 * 128)  # Q, O: h x h; K, V: h x (8 heads x 128)
    mlp = 3 * 8192 * 28672  # gate, up, down
    p = 80 * (attn + mlp) + 2 * v * 8192  # untied input and output embeddings
    assert p == 70_564_970_496
    per_rank = p // (8 * 4)
    assert per_rank == 2_205_155_328
    # Distributed optimizer: gradients reduce-scattered in fp32, bf16 parameters all-gathered.
    assert c["dp_grad"]["kind"] == "reduce_scatter" and c["dp_grad"]["group"] == "dp"
    assert c["dp_grad"]["message_bytes"] == per_rank * 4 == 8_820_621_312
    assert c["dp_param_allgather"]["message_bytes"] == per_rank * 2 == 4_410_310_656
    assert c["dp_grad"]["count"] == c["dp_param_allgather"]["count"] == 1
    # Compute: FLOPs 12 B s L h^2 (1 + 8/64 + s/h) + 12 B s h f (3/2) L + 6 B s h V.
    b_, s_, h_ = 32, 8192, 8192
    flops = 12 * b_ * s_ * 80 * h_**2 * (1 + 8 / 64 + s_ / h_)
    flops += 18 * b_ * s_ * h_ * 28672 * 80 + 6 * b_ * s_ * h_ * v
    us = flops / (64 * 989.4e12 * 0.45) * (1 + 3 / 16) * 1e6
    assert j["compute_time_us"] == pytest.approx(us, rel=1e-9)


def test_llama3_70b_with_context_parallel_by_hand():
    args = parse_args(
        [*LLAMA3_70B, "--pipeline-model-parallel-size", "4", "--context-parallel-size", "2"]
    )
    wl = to_workload(args, gpus=64, expand=True)
    (j,) = wl["jobs"]
    assert j["parallelism"] == {"tp": 8, "pp": 4, "dp": 1, "cp": 2}
    c = colls_of(wl)
    # dp = 64 / (8 * 2 * 4) = 1, m = 32, slots 35; each rank holds s / cp = 4096 tokens.
    assert c["tp_allgather"]["message_bytes"] == 1 * 4096 * 8192 * 2
    assert c["tp_allgather"]["count"] == 4 * 20 * 35
    # K and V of the whole sequence for 8 / 8 = 1 K/V head per tp rank, head_dim 128, bf16.
    kv = 2 * 1 * 8192 * 1 * 128 * 2
    assert kv == 4_194_304
    assert c["cp_kv_allgather"]["group"] == "cp"
    assert c["cp_kv_allgather"]["message_bytes"] == c["cp_dkv_reducescatter"]["message_bytes"] == kv
    assert c["cp_kv_allgather"]["count"] == 2 * 20 * 35  # forward + backward re-exchange
    assert c["cp_dkv_reducescatter"]["count"] == 20 * 35
    # Gradients are reduced over the dp x cp ranks (Megatron's data-parallel group with cp).
    assert c["dp_grad"]["group"] == "dp_cp"
    assert c["dp_grad"]["message_bytes"] == 2_205_155_328 * 4


# ---------------------------------------------------------------- Mixtral 8x7B, by hand

MIXTRAL = (  # noqa: SIM905
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
    "--group-query-attention --num-query-groups 8 --swiglu --seq-length 4096 "
    "--micro-batch-size 1 --global-batch-size 256 --vocab-size 32000 "
    "--untie-embeddings-and-output-weights --bf16 --use-distributed-optimizer "
    "--num-experts 8 --moe-router-topk 2 --moe-token-dispatcher-type alltoall "
    "--moe-grouped-gemm --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2 "
    "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 8"
).split()


def test_mixtral_8x7b_tp2_ep8_dp32_by_hand():
    wl = to_workload(parse_args(MIXTRAL), gpus=64, expand=True)
    (j,) = wl["jobs"]
    assert j["parallelism"] == {"tp": 2, "pp": 1, "dp": 32, "ep": 8}
    c = colls_of(wl)
    # m = 256 / 32 = 8 = slots (pp 1). Every layer is MoE (--moe-layer-freq 1).
    act = 1 * 4096 * 4096 * 2
    assert act == 33_554_432
    assert c["tp_allgather"]["message_bytes"] == act and c["tp_allgather"]["count"] == 4 * 32 * 8
    # All-to-all: the 4096 / 2 = 2048 tokens a rank holds under SP, each sent to k = 2 experts.
    a2a = (4096 // 2) * 2 * 4096 * 2
    assert a2a == 33_554_432
    assert c["ep_alltoall"]["kind"] == "all_to_all" and c["ep_alltoall"]["group"] == "ep"
    assert c["ep_alltoall"]["message_bytes"] == a2a
    assert c["ep_alltoall"]["count"] == 4 * 32 * 8  # dispatch + combine, forward + backward
    # Then all-gathered over tp (and reduce-scattered at combine): all 4096 x 2 token copies.
    assert c["ep_tp_allgather"]["message_bytes"] == 4096 * 2 * 4096 * 2 == 67_108_864
    assert c["ep_tp_allgather"]["count"] == c["ep_tp_reducescatter"]["count"] == 2 * 32 * 8
    # Dense parameters: attention and the untied embeddings (32000 = 125 x 256: no padding).
    attn = 32 * (2 * 4096 * 4096 + 2 * 4096 * (8 * 128))
    emb = 2 * 32000 * 4096
    dense = attn + emb
    assert dense == 1_604_321_280
    assert c["dp_grad"]["group"] == "dp"
    assert c["dp_grad"]["message_bytes"] == dense / 2 * 4 == 3_208_642_560
    # Expert parameters: 8 / 8 = 1 expert per EP rank per layer, reduced over edp = 32 / 8 = 4.
    experts = 32 * 1 * 3 * 4096 * 14336
    assert c["dp_grad_expert"]["group"] == "edp"
    assert c["dp_grad_expert"]["message_bytes"] == experts / 2 * 4 == 11_274_289_152
    assert c["dp_param_allgather_expert"]["message_bytes"] == experts / 2 * 2
    # The whole model: 46.7e9 parameters ("47B" in the Mixtral paper).
    assert dense + 8 * 32 * 3 * 4096 * 14336 == 46_701_477_888


# --------------------------------------------------------- parsing, refusals and the CLI


def test_padded_vocab_is_megatrons():
    assert padded_vocab(128256, 128, 8) == 129024
    assert padded_vocab(32000, 128, 2) == 32000
    assert padded_vocab(50257, 128, 1) == 50304  # GPT-2's 50257 padded as Megatron logs it


def test_yaml_mapping_equals_command_line(tmp_path):
    args = parse_args(MIXTRAL)
    mapping = {k.replace("_", "-"): v for k, v in args.items()}
    mapping["cp-comm-type"] = "p2p"
    f = tmp_path / "args.yaml"
    f.write_text(yaml.safe_dump(mapping))
    from_file = load_args_file(f)
    assert from_file.pop("cp_comm_type") == ["p2p"]
    assert from_file == args
    (tmp_path / "line.yaml").write_text(yaml.safe_dump(" ".join(MIXTRAL)))
    assert load_args_file(tmp_path / "line.yaml") == args


@pytest.mark.parametrize(
    ("extra", "gpus", "match"),
    [
        (["--bogus-arg", "1"], 64, "unknown argument --bogus-arg"),
        (["--num-layers-per-virtual-pipeline-stage", "2"], 64, "interleaved"),
        (["--moe-layer-freq", "2"], 64, "moe-layer-freq"),
        (["--expert-tensor-parallel-size", "1"], 64, "expert-tensor-parallel-size"),
        ([], 51, "not divisible"),
        ([], None, "world size is required"),
        (["--world-size", "32"], 64, "contradicts"),
        (["--context-parallel-size", "2", "--cp-comm-type", "a2a"], 64, "a2a"),
        (["--recompute-granularity", "full"], 64, "recompute-method"),
        (["--micro-batch-size", "1"], 64, "given twice"),
        (["--train-iters", "x"], 64, "integer"),
    ],
)
def test_refusals_name_the_argument(extra, gpus, match):
    with pytest.raises(MegatronArgsError, match=match):
        to_workload(parse_args([*MIXTRAL, *extra]), gpus=gpus)


def test_default_dispatcher_is_refused_for_expert_parallelism():
    args = [a for a in MIXTRAL if a not in ("--moe-token-dispatcher-type", "alltoall")]
    with pytest.raises(MegatronArgsError, match="allgather"):
        to_workload(parse_args(args), gpus=64)


TOPOLOGY = """
topology:
  gpus_per_server: 8
  transceivers: {attach: [ocs0, ocs1], rate_gbps: 400}
  racks: {count: 4, servers_per_rack: 2}
  wavelengths_per_fibre: 4
  ocs:
    - {name: ocs0, ports: 16}
    - {name: ocs1, ports: 16}
workload: wl.yaml
"""


@pytest.mark.parametrize("expand", [False, True])
@pytest.mark.parametrize(
    "argv",
    [
        [*LLAMA3_70B, "--pipeline-model-parallel-size", "4"],
        [*LLAMA3_70B, "--pipeline-model-parallel-size", "4", "--context-parallel-size", "2"],
        MIXTRAL,
    ],
    ids=["llama3", "llama3-cp", "mixtral"],
)
def test_cli_output_validates(tmp_path: Path, argv, expand):
    (tmp_path / "inst.yaml").write_text(TOPOLOGY)
    out = tmp_path / "wl.yaml"
    cmd = ["import", "megatron", *argv, "--gpus", "64", "-o", str(out)]
    res = CliRunner().invoke(main, cmd + (["--expand"] if expand else []))
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.startswith("# optnet import megatron --num-layers")
    inst = load_instance(tmp_path / "inst.yaml")
    all_candidates(inst)
    (j,) = inst.jobs
    assert j.gpus == 64 and j.tp * j.cp * j.pp * j.dp == 64
    shorthand = to_workload(parse_args(argv), gpus=64, expand=True)["jobs"][0]
    assert {c.name: c.message_bytes for c in j.collectives} == {
        c["name"]: c["message_bytes"] for c in shorthand["collectives"]
    }
    assert j.compute_time_us == pytest.approx(shorthand["compute_time_us"], rel=1e-12)


def test_cli_errors_exit_2_without_traceback(tmp_path):
    res = CliRunner().invoke(main, ["import", "megatron", *MIXTRAL, "--oops", "--gpus", "64"])
    assert res.exit_code == 2
    assert "unknown argument --oops" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["import", "megatron", str(tmp_path / "missing.yaml")])
    assert res.exit_code == 2 and "not a file" in res.output


def test_cli_reads_a_yaml_file_of_arguments(tmp_path):
    f = tmp_path / "args.yaml"
    f.write_text(yaml.safe_dump([*MIXTRAL]))
    res = CliRunner().invoke(main, ["import", "megatron", str(f), "--world-size", "64"])
    assert res.exit_code == 0, res.output
    wl = yaml.safe_load(res.output)
    assert wl["jobs"][0]["transformer"]["num_experts"] == 8
    assert wl["jobs"][0]["transformer"]["moe_top_k"] == 2


def test_imported_cp_workload_solves(tmp_path):
    # 16 GPUs on two 8-GPU servers: tp 4 x cp 2 inside a server, dp 2 across the two.
    topo = TOPOLOGY.replace("{count: 4, servers_per_rack: 2}", "{count: 2, servers_per_rack: 1}")
    (tmp_path / "inst.yaml").write_text(topo)
    argv = (  # noqa: SIM905
        "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --group-query-attention "
        "--num-query-groups 4 --swiglu --seq-length 4096 --micro-batch-size 1 "
        "--global-batch-size 8 --tensor-model-parallel-size 4 --context-parallel-size 2 "
        "--sequence-parallel --vocab-size 32000 --bf16 --gpus 16"
    ).split()
    r = CliRunner().invoke(main, ["import", "megatron", *argv, "-o", str(tmp_path / "wl.yaml")])
    assert r.exit_code == 0, r.output
    out = tmp_path / "res.json"
    cmd = ["solve", str(tmp_path / "inst.yaml"), "--time-limit", "2", "-o", str(out)]
    r = CliRunner().invoke(main, cmd)
    assert r.exit_code in (0, 1), r.output

    res = json.loads(out.read_text())
    text = json.dumps(res)
    for name in ("cp_kv_allgather", "cp_dkv_reducescatter", "tp_allgather", "dp_grad"):
        assert name in text


def test_new_fields_at_their_defaults_keep_the_input_hash(tmp_path):
    from optnet.shorthand import ADDED_FIELD_DEFAULTS

    (tmp_path / "inst.yaml").write_text(TOPOLOGY)
    spec = {"layers": 4, "hidden": 256, "heads": 8, "seq_len": 128, "global_batch": 8}
    job = {"name": "j", "gpus": 16, "parallelism": {"tp": 8, "dp": 2}, "transformer": spec}
    (tmp_path / "wl.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    plain = load_instance(tmp_path / "inst.yaml").input_hash
    job["parallelism"]["cp"] = 1
    job["transformer"] = {**spec, **ADDED_FIELD_DEFAULTS}
    (tmp_path / "wl.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    assert load_instance(tmp_path / "inst.yaml").input_hash == plain
    job["transformer"]["kv_heads"] = 8  # written out (even = heads): a different input
    (tmp_path / "wl.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    assert load_instance(tmp_path / "inst.yaml").input_hash != plain
