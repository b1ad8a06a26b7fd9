"""Derive a training job's per-iteration collectives and compute time from a transformer's shape.

This is the "shorthand" workload front-end of optnet: instead of writing a job's collectives by
hand, describe a GPT-style transformer and the training system (:class:`TransformerSpec`) and call
:func:`derive` with the parallel layout ``(tp, pp, dp, ep)``. It returns ``compute_time_us`` and a
list of collective dicts in the job schema used elsewhere in optnet::

    {"name": str, "kind": str, "group": str, "message_bytes": float, "count": int,
     "overlap": float}

``message_bytes`` follows the MPICH convention (per-rank vector for all_reduce / broadcast / reduce
/ send_recv, full gathered vector for all_gather / reduce_scatter, total send buffer of one rank for
all_to_all). ``count`` is the number of times the collective sits on one rank's critical path per
iteration. Every formula, its source, and which numbers are conventions rather than sourced facts
are listed in ``docs/workloads.md``; the docstrings below give the formulas in one line each.

Notation: B global batch (sequences), b micro-batch, s sequence length, L layers, h hidden size,
f FFN hidden size, V vocabulary, P parameter count, m = B / (b * dp) micro-batches per pipeline per
iteration, "slots" = m + pp - 1 = micro-batch/stage slots on the pipeline's critical path.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ADDED_FIELD_DEFAULTS",
    "COLLECTIVE_KINDS",
    "GROUPS",
    "TransformerSpec",
    "default_compression_ratio",
    "derive",
    "flops_per_iteration",
    "microbatches",
    "moe_layers_per_stage",
    "pp_p2p_count",
]

COLLECTIVE_KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send_recv",
)
"""Collective kinds allowed by the job schema."""

GROUPS = ("tp", "pp", "dp", "ep", "cp", "dp_cp", "edp", "world")
"""Communicator groups allowed by the job schema (``cp``, ``dp_cp``, ``edp``: Megatron-LM's
context-parallel, data-parallel-with-context-parallel and expert-data-parallel groups)."""

MIB = 1024 * 1024
"""PyTorch DDP interprets ``bucket_cap_mb`` as MiB (``int(bucket_cap_mb * 1024 * 1024)``)."""

# QSGD default encoding (Alistarh et al., NeurIPS'17): 4 bits per coordinate (sign + level) plus
# one fp32 scale (the bucket's norm) per bucket of 512 coordinates. The 4-bit / 512 pairing is the
# configuration we remember from the paper's experiments [unverified]; treat it as a convention.
QSGD_BITS_PER_COORD = 4
QSGD_BUCKET_COORDS = 512
QSGD_SCALE_BITS = 32

# DGC default encoding (Lin et al., ICLR'18): 99.9 % of gradient coordinates are not sent (density
# 0.1 %, from the paper's abstract); each kept coordinate is sent as its value plus a 32-bit index
# (the index width is our convention).
DGC_DENSITY = 0.001
DGC_INDEX_BITS = 32


ADDED_FIELD_DEFAULTS = {
    "kv_heads": None,
    "gated_mlp": False,
    "tie_embeddings": True,
    "sequence_parallel": False,
    "cp_comm": "p2p",
    "overlap_cp": 0.0,
    "num_experts": None,
    "moe_top_k": 1,
    "moe_capacity_factor": None,
    "grad_bytes_per_param": None,
}
"""Fields added to :class:`TransformerSpec` after instance hashes were first recorded, with their
defaults: an instance that leaves them at the default keeps its input hash
(``optnet.instance._workload_raw`` drops them)."""


class TransformerSpec(BaseModel):
    """A GPT-style decoder-only transformer and the training system that runs it.

    Units are in field names where a field has units; counts (layers, heads, tokens) are plain.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    layers: int = Field(ge=1, le=100_000)
    """Number of transformer layers L."""

    hidden: int = Field(ge=1, le=10_000_000)
    """Hidden (model) dimension h."""

    heads: int = Field(ge=1, le=1_000_000)
    """Attention (query) heads; must divide ``hidden`` (head dimension d = hidden / heads)."""

    kv_heads: int | None = Field(default=None, ge=1, le=1_000_000)
    """Key/value heads for grouped-query attention (Megatron-LM ``--num-query-groups``, Llama's
    ``num_key_value_heads``); must divide ``heads``. ``None`` = heads (multi-head attention)."""

    seq_len: int = Field(ge=1, le=100_000_000)
    """Sequence length s in tokens."""

    vocab: int = Field(default=50257, ge=1, le=100_000_000)
    """Vocabulary size V (GPT-2 BPE by default; Megatron pads it, which we ignore)."""

    ffn_hidden: int | None = Field(default=None, ge=1, le=100_000_000)
    """FFN inner dimension f; ``None`` means 4 * hidden (GPT-2/GPT-3)."""

    gated_mlp: bool = False
    """Gated MLP (SwiGLU, Megatron-LM ``--swiglu``): three h x f matrices (gate, up, down)
    instead of two; f is the size of each (Llama's ``intermediate_size``)."""

    tie_embeddings: bool = True
    """Input embedding and output layer share one V x h matrix; false (Megatron-LM
    ``--untie-embeddings-and-output-weights``, Llama-3) counts two."""

    sequence_parallel: bool = False
    """Megatron sequence parallelism (Korthikanti et al. 2022): each tensor-parallel all-reduce
    of activations becomes a reduce-scatter plus an all-gather of the same vector."""

    cp_comm: Literal["p2p", "all_gather"] = "p2p"
    """Context-parallel K/V exchange (Megatron-LM ``--cp-comm-type``): ``p2p`` ring (may overlap
    attention compute, ``overlap_cp``) or ``all_gather`` (not overlapped). Same bytes."""

    overlap_cp: float = Field(default=0.0, ge=0, le=1)
    """Fraction of the p2p context-parallel K/V exchange hidden behind attention compute."""

    num_experts: int | None = Field(default=None, ge=1, le=1_000_000)
    """Experts per MoE layer E (Megatron-LM ``--num-experts``); E / ep per EP rank. ``None`` with
    ep > 1 keeps the one-expert-per-EP-rank model (all gradients over dp)."""

    moe_top_k: int = Field(default=1, ge=1, le=1_000)
    """Experts each token is routed to (Megatron-LM ``--moe-router-topk``; Mixtral: 2)."""

    moe_capacity_factor: float | None = Field(default=None, gt=0, le=1000, allow_inf_nan=False)
    """Expert capacity factor: all-to-all buffers hold capacity_factor x k x tokens (exact with
    Megatron's ``--moe-pad-expert-input-to-capacity``, an upper bound otherwise). ``None`` =
    dropless, k x tokens under uniform routing."""

    params: float | None = Field(default=None, gt=0, le=1e15, allow_inf_nan=False)
    """Parameter count P; ``None`` means L * (2 h^2 + 2 h g d + n_mlp h f) + e V h, with g the
    K/V heads, d = h / heads, n_mlp = 3 if gated else 2, e = 1 if tied else 2, each MoE layer
    holding ``num_experts`` MLPs (= 12 L h^2 + V h for GPT-3 shapes; biases, norms and position
    embeddings ignored). With MoE (ep > 1, no
    ``num_experts``) this is the count held by one tp x pp model replica (one expert per EP
    rank); it cannot be combined with ``num_experts``."""

    global_batch: int = Field(ge=1, le=1_000_000_000)
    """Global batch B in sequences per iteration (optimizer step)."""

    micro_batch: int = Field(default=1, ge=1, le=1_000_000_000)
    """Micro-batch b in sequences per pipeline micro-step."""

    bytes_per_param: int = Field(default=2, ge=1, le=16)
    """Bytes per parameter, gradient and activation element (2 = bf16)."""

    grad_bytes_per_param: int | None = Field(default=None, ge=1, le=16)
    """Bytes per gradient element in the data-parallel reduction; ``None`` = bytes_per_param
    (Megatron-LM reduces bf16 gradients in fp32, 4, unless ``--grad-reduce-in-bf16``)."""

    gpu_peak_tflops: float = Field(default=989.4, ge=1e-3, le=1e6, allow_inf_nan=False)
    """Peak dense throughput per GPU in TFLOP/s (H100 SXM5 BF16 dense = 989.4: NVIDIA H100 Tensor
    Core GPU Architecture whitepaper, 2022)."""

    mfu: float = Field(default=0.45, ge=1e-3, le=1)
    """Achieved fraction of peak on the executed FLOPs, outside the pipeline bubble (0 < mfu <= 1).
    With ``recompute`` the executed FLOPs include the recomputation, so this is strictly the
    hardware FLOPs utilisation."""

    recompute: bool = False
    """Full activation recomputation: every layer's forward is re-run once during backward."""

    data_parallel: Literal["ddp", "zero1", "zero2", "zero3", "parameter_server"] = "ddp"
    """How gradients are synchronised across the dp group (``ddp`` also covers Horovod)."""

    bucket_mb: float = Field(default=25.0, ge=1e-3, le=1e9, allow_inf_nan=False)
    """DDP/Horovod gradient bucket size in MiB (PyTorch DDP default 25; Horovod's fusion buffer
    default was 64, 128 since v0.21). Gradients are sent as ceil(grad_bytes / bucket) equal
    all-reduces."""

    overlap_grad_sync: float = Field(default=0.0, ge=0, le=1)
    """Fraction of gradient synchronisation (``dp_grad``) hidden behind backward compute."""

    overlap_param_gather: float = Field(default=0.0, ge=0, le=1)
    """Fraction of parameter all-gathers (``dp_param_allgather``: ZeRO post-step gather, ZeRO-3
    prefetch, parameter-server pull) hidden behind compute."""

    pipeline_schedule: Literal["gpipe", "1f1b"] = "1f1b"
    """Pipeline schedule; both have bubble fraction (pp - 1) / m, their p2p paths differ."""

    compression: Literal["none", "qsgd", "dgc"] = "none"
    """Gradient compression applied to the dp gradient collective (``dp_grad``) only."""

    compression_ratio: float | None = Field(default=None, ge=1, le=1e6, allow_inf_nan=False)
    """Uncompressed / compressed gradient bytes; ``None`` uses
    :func:`default_compression_ratio` (qsgd about 3.94 for bf16, dgc about 333 for bf16)."""

    codec_gbytes_per_s: float = Field(default=100.0, ge=1e-3, le=1e9, allow_inf_nan=False)
    """Encode + decode throughput per GPU in GB/s (1e9 B/s) over uncompressed bytes. A
    convention, not a measured value."""

    moe_layer_interval: int = Field(default=2, ge=1, le=100_000)
    """With ep > 1, every ``moe_layer_interval``-th layer (1-based) is a mixture-of-experts layer;
    2 = every other layer as in GShard and Switch Transformer, 1 = every layer."""

    @model_validator(mode="after")
    def _check_shape(self) -> TransformerSpec:
        if self.hidden % self.heads != 0:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.compression == "none" and self.compression_ratio is not None:
            raise ValueError("compression_ratio is set but compression is 'none'")
        if self.kv_heads is not None and self.heads % self.kv_heads != 0:
            raise ValueError(
                f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads})"
            )
        if self.num_experts is None:
            if self.moe_top_k > 1 or self.moe_capacity_factor is not None:
                raise ValueError("moe_top_k > 1 and moe_capacity_factor need num_experts")
        else:
            if self.moe_top_k > self.num_experts:
                raise ValueError(
                    f"moe_top_k ({self.moe_top_k}) exceeds num_experts ({self.num_experts})"
                )
            if self.params is not None:
                raise ValueError(
                    "params cannot be combined with num_experts (the dense / expert split of the "
                    "gradients is derived from the shape)"
                )
        return self

    @property
    def kv_heads_count(self) -> int:
        """K/V heads g (``kv_heads`` or ``heads``)."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def head_dim(self) -> int:
        """Head dimension d = hidden / heads (Megatron-LM ``kv_channels`` default)."""
        return self.hidden // self.heads

    @property
    def moe_layers(self) -> int:
        """MoE layers of the whole model: L // moe_layer_interval with ``num_experts``, else 0
        (the ep > 1 model without ``num_experts`` is top-1, so its FLOPs equal the dense ones)."""
        return self.layers // self.moe_layer_interval if self.num_experts is not None else 0

    @property
    def attention_params_per_layer(self) -> int:
        """Q and output projections h^2 each, K and V projections h g d each (GQA)."""
        h = self.hidden
        return 2 * h * h + 2 * h * self.kv_heads_count * self.head_dim

    @property
    def mlp_params_per_expert(self) -> int:
        """(3 if gated else 2) h f: one dense MLP, or one expert of an MoE layer."""
        return (3 if self.gated_mlp else 2) * self.hidden * self.ffn_hidden_size

    @property
    def embedding_params(self) -> int:
        """V h tied, 2 V h untied."""
        return (1 if self.tie_embeddings else 2) * self.vocab * self.hidden

    @property
    def ffn_hidden_size(self) -> int:
        """FFN inner dimension f (``ffn_hidden`` or 4 * hidden)."""
        return self.ffn_hidden if self.ffn_hidden is not None else 4 * self.hidden

    @property
    def param_count(self) -> float:
        """Parameter count P of the whole model: ``params`` or L (attention + MLP) + embeddings,
        each MoE layer holding ``num_experts`` expert MLPs (router weights ignored)."""
        if self.params is not None:
            return float(self.params)
        experts = self.num_experts if self.num_experts is not None else 1
        mlp = self.mlp_params_per_expert
        dense_layers = self.layers - self.moe_layers
        return float(
            self.layers * self.attention_params_per_layer
            + dense_layers * mlp
            + self.moe_layers * experts * mlp
            + self.embedding_params
        )

    @property
    def effective_compression_ratio(self) -> float:
        """Compression ratio actually applied to ``dp_grad`` (1.0 without compression)."""
        if self.compression == "none":
            return 1.0
        if self.compression_ratio is not None:
            return float(self.compression_ratio)
        return default_compression_ratio(self.compression, self.bytes_per_param)


def default_compression_ratio(method: str, bytes_per_param: int) -> float:
    """Default uncompressed/compressed byte ratio for a gradient compression method.

    * ``qsgd``: 8*bpp / (4 + 32/512), i.e. 4-bit coordinates plus one fp32 scale per 512
      coordinates; 3.94 for bf16, 7.88 for fp32 (Alistarh et al. 2017; 4-bit/512 is a convention).
    * ``dgc``: 8*bpp / (0.001 * (8*bpp + 32)), i.e. 0.1 % of coordinates sent as value + 32-bit
      index; 333 for bf16, 500 for fp32 (Lin et al. 2018 report 270x-600x).
    """
    bits = 8 * bytes_per_param
    if method == "qsgd":
        return bits / (QSGD_BITS_PER_COORD + QSGD_SCALE_BITS / QSGD_BUCKET_COORDS)
    if method == "dgc":
        return bits / (DGC_DENSITY * (bits + DGC_INDEX_BITS))
    if method == "none":
        return 1.0
    raise ValueError(f"unknown compression method {method!r}")


def flops_per_iteration(spec: TransformerSpec) -> float:
    """Model FLOPs executed per iteration (whole job, all GPUs).

    Megatron-LM ``num_floating_point_operations`` (the form without the causal-mask halving):
    F = 12 B s L h^2 (1 + g/n + s/h) + 12 B s h f gl (L - L_moe + k L_moe) + 6 B s h V, with g/n
    the K/V-head to head ratio, gl = 3/2 for a gated MLP (else 1), k the router top-k and L_moe
    the MoE layers. Plain MHA, dense: 12 B s L h^2 (2 + s/h + f/h) + 6 B s h V, which for f = 4h
    is 72 B s L h^2 (1 + s/(6h) + V/(12 L h)). With full recomputation the transformer-layer part
    is multiplied by 4/3 (one extra forward on top of forward + 2x backward) and the logit layer
    is not recomputed: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)), Eq. 3 of Narayanan et al. SC'21.
    """
    big_b, s, n_layers = spec.global_batch, spec.seq_len, spec.layers
    h, f, v = spec.hidden, spec.ffn_hidden_size, spec.vocab
    gl = 1.5 if spec.gated_mlp else 1.0
    routed_layers = n_layers - spec.moe_layers + spec.moe_top_k * spec.moe_layers
    if spec.kv_heads_count == spec.heads and gl == 1.0 and routed_layers == n_layers:
        # Plain MHA, dense MLP: the original expression, kept bit-for-bit.
        layer_flops = 12.0 * big_b * s * n_layers * h * h * (2.0 + s / h + f / h)
    else:
        kv_ratio = spec.kv_heads_count / spec.heads
        attn = 12.0 * big_b * s * n_layers * h * h * (1.0 + kv_ratio + s / h)
        layer_flops = attn + 12.0 * big_b * s * h * f * gl * routed_layers
    logit_flops = 6.0 * big_b * s * h * v
    if spec.recompute:
        layer_flops *= 4.0 / 3.0
    return layer_flops + logit_flops


def microbatches(spec: TransformerSpec, dp: int) -> int:
    """Micro-batches per pipeline per iteration, m = B / (b * dp); ValueError unless integral."""
    per_step = spec.micro_batch * dp
    if spec.global_batch % per_step != 0:
        raise ValueError(
            f"global_batch ({spec.global_batch}) must be divisible by micro_batch * dp "
            f"({spec.micro_batch} * {dp} = {per_step})"
        )
    return spec.global_batch // per_step


def pp_p2p_count(pp: int, m: int, schedule: str) -> int:
    """Stage-to-stage exchanges on the pipeline's critical path per iteration.

    Model: uniform stages, blocking (rendezvous) p2p, and a stage that sends and receives in the
    same step posts both as one batched exchange (Megatron-LM's ``send_forward_recv_backward`` /
    ``send_backward_recv_forward``; the same batching applied to GPipe).

    * ``gpipe``: 2 (m + pp - 2): pp - 1 hops for the first micro-batch down and the last gradient
      up, plus one exchange per further micro-batch in each direction.
    * ``1f1b``: pp = 2: m + 1 (the two stages fuse activation and gradient exchange into one
      rendezvous per cycle); pp >= 3: 2 (pp - 1) for m = 1, else 2 (m + pp - 2) - 1.

    Both are exact for the lockstep model (checked by a rendezvous simulation in
    tests/test_shorthand.py). pp = 1 gives 0.
    """
    if pp < 1 or m < 1:
        raise ValueError(f"pp ({pp}) and m ({m}) must be >= 1")
    if pp == 1:
        return 0
    if schedule == "gpipe":
        return 2 * (m + pp - 2)
    if schedule == "1f1b":
        if pp == 2:
            return m + 1
        if m == 1:
            return 2 * (pp - 1)
        return 2 * (m + pp - 2) - 1
    raise ValueError(f"unknown pipeline schedule {schedule!r}")


def moe_layers_per_stage(layers: int, pp: int, interval: int) -> int:
    """MoE layers on the busiest pipeline stage.

    Layer i (1-based) is an MoE layer iff i % interval == 0; stage k holds layers
    k*L/pp + 1 .. (k+1)*L/pp.
    """
    per_stage = layers // pp
    return max((k + 1) * per_stage // interval - k * per_stage // interval for k in range(pp))


def _check_layout(spec: TransformerSpec, tp: int, pp: int, dp: int, ep: int, cp: int = 1) -> int:
    """Validate the parallel layout against the spec; return m."""
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep), ("cp", cp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if cp == 1:
        if dp % ep != 0:
            raise ValueError(f"ep ({ep}) must divide dp ({dp})")
    elif (dp * cp) % ep != 0:
        raise ValueError(f"ep ({ep}) must divide dp * cp ({dp} * {cp} = {dp * cp})")
    if spec.layers % pp != 0:
        raise ValueError(f"layers ({spec.layers}) must be divisible by pp ({pp})")
    if spec.heads % tp != 0:
        raise ValueError(f"heads ({spec.heads}) must be divisible by tp ({tp})")
    if spec.kv_heads is not None and spec.kv_heads % tp != 0:
        raise ValueError(f"kv_heads ({spec.kv_heads}) must be divisible by tp ({tp})")
    if spec.ffn_hidden_size % tp != 0:
        raise ValueError(f"ffn_hidden ({spec.ffn_hidden_size}) must be divisible by tp ({tp})")
    if spec.seq_len % cp != 0:
        raise ValueError(f"seq_len ({spec.seq_len}) must be divisible by cp ({cp})")
    if ep > 1 and spec.layers // spec.moe_layer_interval < 1:
        raise ValueError(
            f"ep = {ep} but the model has no MoE layer (layers = {spec.layers}, "
            f"moe_layer_interval = {spec.moe_layer_interval})"
        )
    if spec.num_experts is not None:
        if spec.num_experts % ep != 0:
            raise ValueError(f"ep ({ep}) must divide num_experts ({spec.num_experts})")
        if tp > 1 and not spec.sequence_parallel:
            raise ValueError(
                "MoE with tp > 1 needs sequence_parallel: true (Megatron-LM's MoELayer refuses "
                "to train MoE with tensor parallelism and without sequence parallelism)"
            )
    return microbatches(spec, dp)


def _coll(name: str, kind: str, group: str, message_bytes: float, count: int, overlap: float):
    return {
        "name": name,
        "kind": kind,
        "group": group,
        "message_bytes": float(message_bytes),
        "count": int(count),
        "overlap": float(overlap),
    }


def derive(
    spec: TransformerSpec, tp: int, pp: int, dp: int, ep: int = 1, cp: int = 1
) -> tuple[float, list[dict]]:
    """Return (compute_time_us, collectives) for one iteration of one rank's critical path.

    gpus = tp * cp * pp * dp; m = B / (b * dp); slots = m + pp - 1; act = b * (s / cp) * h *
    bytes_per_param; grad = P / (tp * pp) * grad_bytes_per_param (even split over tp x pp;
    parameters in bytes_per_param).

    * compute_time_us = F / (gpus * peak * mfu) * (1 + (pp - 1) / m) + codec time, with F from
      :func:`flops_per_iteration`; codec time = sum(uncompressed bytes * count of compressed
      collectives) / codec throughput.
    * tp > 1 ``tp_allreduce``: all_reduce, message act, count (4 + 2*recompute) * (L/pp) * slots
      (Megatron f/g operators: 2 forward + 2 backward per layer per micro-batch, +2 when the
      forward is recomputed; every slot of the critical path carries them), overlap 0. With
      ``sequence_parallel`` it is replaced by ``tp_allgather`` (all_gather) and
      ``tp_reducescatter`` (reduce_scatter), each message act (the full gathered vector) and
      the same count (Korthikanti et al. 2022).
    * pp > 1 ``pp_sendrecv``: send_recv, message act / tp (activations enter the stage boundary
      sharded over tp: Megatron scatter/gather, sequence parallelism), count
      :func:`pp_p2p_count`, overlap 0.
    * cp > 1 ``cp_kv_allgather``: all_gather over cp, message 2 b s (g/tp) d bytes (the K and V
      of the whole sequence for this rank's g/tp K/V heads), count (2 + recompute) (L/pp) slots
      (forward, backward re-exchange, recomputed forward); ``cp_dkv_reducescatter``:
      reduce_scatter over cp, same message, count (L/pp) slots (backward dK/dV). Overlap
      ``overlap_cp`` for ``cp_comm: p2p``, 0 for ``all_gather``.
    * MoE ``ep_alltoall``: all_to_all, message b (s/cp) h bytes (top-1, capacity 1: a rank's
      whole token buffer) for ep > 1 without ``num_experts``; with ``num_experts``: b (s/cp) /
      tp' h bytes k c (tp' = tp with sequence parallelism, k top-k, c capacity factor or 1).
      Count (4 + 2*recompute) * moe_layers_per_stage * slots (dispatch + combine, forward and
      backward). With ``num_experts`` and tp > 1, Megatron's all-to-all dispatcher also
      all-gathers the received tokens over tp and reduce-scatters them at combine:
      ``ep_tp_allgather`` / ``ep_tp_reducescatter``, message b (s/cp) h bytes k c, count
      (2 + recompute) * moe_layers_per_stage * slots each.
    * dp * cp > 1, compression ratio r applied to ``dp_grad`` only (group dp; dp_cp when
      cp > 1; with ``num_experts`` the expert parameters are reduced separately over edp as
      ``dp_grad_expert`` / ``dp_param_allgather_expert``):
        - ddp: ``dp_grad`` all_reduce, n = ceil(grad / bucket) buckets, message grad / n / r,
          count n, overlap overlap_grad_sync.
        - zero1: ``dp_grad`` reduce_scatter grad / r, count 1; ``dp_param_allgather`` all_gather
          grad, count 1 (post-step), overlap overlap_param_gather.
        - zero2: as zero1 but ``dp_grad`` count slots (partitioned gradients are reduced every
          micro-batch, DeepSpeed stage >= 2).
        - zero3: ``dp_grad`` reduce_scatter grad / r, count slots; ``dp_param_allgather``
          all_gather grad, count 2 * slots (forward and backward gather); no post-step gather.
          Volume (m = 1) is 3x vs 2x for ddp: the 1.5x of Rajbhandari et al.
        - parameter_server: sharded servers co-located with workers; push = ``dp_grad``
          reduce_scatter grad / r, pull = ``dp_param_allgather`` all_gather grad, count 1 each.

    Groups of size 1 produce no collective. Raises ValueError for inconsistent layouts.
    """
    m = _check_layout(spec, tp, pp, dp, ep, cp)
    gpus = tp * cp * pp * dp
    slots = m + pp - 1
    rc = 2 if spec.recompute else 0
    layers_per_stage = spec.layers // pp
    tokens = spec.micro_batch * (spec.seq_len // cp)  # tokens of one micro-batch on one rank
    act_bytes = float(tokens * spec.hidden * spec.bytes_per_param)
    ratio = spec.effective_compression_ratio

    ideal_s = flops_per_iteration(spec) / (gpus * spec.gpu_peak_tflops * 1e12 * spec.mfu)
    compute_us = ideal_s * 1e6 * (1.0 + (pp - 1) / m)

    colls: list[dict] = []
    if tp > 1:
        count = (4 + rc) * layers_per_stage * slots
        if spec.sequence_parallel:
            colls.append(_coll("tp_allgather", "all_gather", "tp", act_bytes, count, 0.0))
            colls.append(_coll("tp_reducescatter", "reduce_scatter", "tp", act_bytes, count, 0.0))
        else:
            colls.append(_coll("tp_allreduce", "all_reduce", "tp", act_bytes, count, 0.0))
    if pp > 1:
        count = pp_p2p_count(pp, m, spec.pipeline_schedule)
        colls.append(_coll("pp_sendrecv", "send_recv", "pp", act_bytes / tp, count, 0.0))
    if cp > 1:
        kv_bytes = float(
            2
            * spec.micro_batch
            * spec.seq_len
            * (spec.kv_heads_count // tp)
            * spec.head_dim
            * spec.bytes_per_param
        )
        overlap = spec.overlap_cp if spec.cp_comm == "p2p" else 0.0
        ag_count = (2 + rc // 2) * layers_per_stage * slots
        rs_count = layers_per_stage * slots
        colls.append(_coll("cp_kv_allgather", "all_gather", "cp", kv_bytes, ag_count, overlap))
        colls.append(
            _coll("cp_dkv_reducescatter", "reduce_scatter", "cp", kv_bytes, rs_count, overlap)
        )
    n_moe = moe_layers_per_stage(spec.layers, pp, spec.moe_layer_interval)
    if spec.num_experts is None:
        if ep > 1 and n_moe > 0:
            count = (4 + rc) * n_moe * slots
            colls.append(_coll("ep_alltoall", "all_to_all", "ep", act_bytes, count, 0.0))
    elif n_moe > 0:
        cf = spec.moe_capacity_factor if spec.moe_capacity_factor is not None else 1.0
        routed = act_bytes * spec.moe_top_k * cf  # token copies of one rank, before the tp split
        sp_split = tp if spec.sequence_parallel else 1
        if ep > 1:
            count = (4 + rc) * n_moe * slots
            colls.append(_coll("ep_alltoall", "all_to_all", "ep", routed / sp_split, count, 0.0))
        if tp > 1:
            count = (2 + rc // 2) * n_moe * slots
            colls.append(_coll("ep_tp_allgather", "all_gather", "tp", routed, count, 0.0))
            colls.append(_coll("ep_tp_reducescatter", "reduce_scatter", "tp", routed, count, 0.0))

    # Gradient groups: (suffix, group, size, bytes of one rank).
    grad_group, grad_size = ("dp", dp) if cp == 1 else ("dp_cp", dp * cp)
    shards = [("", grad_group, grad_size, spec.param_count / (tp * pp))]
    if spec.num_experts is not None:
        expert_params = spec.moe_layers * (spec.num_experts // ep) * spec.mlp_params_per_expert
        dense_params = spec.param_count - spec.moe_layers * spec.num_experts * (
            spec.mlp_params_per_expert
        )
        shards = [
            ("", grad_group, grad_size, dense_params / (tp * pp)),
            ("_expert", "edp", dp * cp // ep, expert_params / (tp * pp)),
        ]
    grad_beta = spec.grad_bytes_per_param or spec.bytes_per_param
    codec_bytes = 0.0
    for suffix, group, size, rank_params in shards:
        if size <= 1 or rank_params <= 0:
            continue
        param_bytes = rank_params * spec.bytes_per_param
        grad_bytes = rank_params * grad_beta
        mode = spec.data_parallel
        if mode == "ddp":
            n_buckets = max(1, math.ceil(grad_bytes / (spec.bucket_mb * MIB)))
            grad_count, grad_kind, grad_msg = n_buckets, "all_reduce", grad_bytes / n_buckets
            gather_count = 0
        elif mode == "zero1":
            grad_count, grad_kind, grad_msg = 1, "reduce_scatter", grad_bytes
            gather_count = 1
        elif mode == "zero2":
            grad_count, grad_kind, grad_msg = slots, "reduce_scatter", grad_bytes
            gather_count = 1
        elif mode == "zero3":
            grad_count, grad_kind, grad_msg = slots, "reduce_scatter", grad_bytes
            gather_count = 2 * slots
        else:  # parameter_server
            grad_count, grad_kind, grad_msg = 1, "reduce_scatter", grad_bytes
            gather_count = 1
        colls.append(
            _coll(
                "dp_grad" + suffix,
                grad_kind,
                group,
                grad_msg / ratio,
                grad_count,
                spec.overlap_grad_sync,
            )
        )
        if gather_count:
            colls.append(
                _coll(
                    "dp_param_allgather" + suffix,
                    "all_gather",
                    group,
                    param_bytes,
                    gather_count,
                    spec.overlap_param_gather,
                )
            )
        if spec.compression != "none":
            codec_bytes += grad_msg * grad_count

    compute_us += codec_bytes / (spec.codec_gbytes_per_s * 1e9) * 1e6
    return compute_us, colls
