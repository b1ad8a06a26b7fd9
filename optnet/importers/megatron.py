"""``optnet import megatron``: a workload section from a Megatron-LM argument list.

A Megatron-LM ``pretrain_gpt.py`` command line (or a YAML file of the same arguments) describes
the model shape and the parallel layout; :func:`to_workload` turns it into one job with the
``transformer:`` shorthand (``optnet.shorthand``), or, with ``expand``, into the explicit
``compute_time_us`` and ``collectives`` the shorthand derives. Argument names and defaults are
Megatron-LM's (megatron/training/arguments.py and the config dataclasses it builds arguments
from: megatron/core/model_parallel_config.py, megatron/core/transformer/transformer_config.py,
megatron/training/config/training_config.py). docs/workloads.md ("Importing a Megatron-LM
argument list") lists every mapping, the arguments ignored as harmless and those refused.

Arguments that change the collectives in a way this model cannot represent are refused with a
message naming them; unknown arguments are refused too (a typo must not be silently dropped).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

import yaml

from optnet.shorthand import TransformerSpec, derive

__all__ = [
    "FLAGS",
    "IGNORED",
    "VALUED",
    "MegatronArgsError",
    "load_args_file",
    "padded_vocab",
    "parse_args",
    "to_workload",
]


class MegatronArgsError(ValueError):
    """A Megatron-LM argument list optnet cannot honour; the message says which argument."""


VALUED = {
    "num_layers": int,
    "hidden_size": int,
    "ffn_hidden_size": int,
    "num_attention_heads": int,
    "kv_channels": int,
    "num_query_groups": int,
    "seq_length": int,
    "max_position_embeddings": int,
    "micro_batch_size": int,
    "global_batch_size": int,
    "tensor_model_parallel_size": int,
    "pipeline_model_parallel_size": int,
    "context_parallel_size": int,
    "expert_model_parallel_size": int,
    "expert_tensor_parallel_size": int,
    "num_experts": int,
    "moe_router_topk": int,
    "moe_expert_capacity_factor": float,
    "moe_layer_freq": int,
    "moe_ffn_hidden_size": int,
    "moe_token_dispatcher_type": str,
    "vocab_size": int,
    "padded_vocab_size": int,
    "make_vocab_size_divisible_by": int,
    "recompute_granularity": str,
    "recompute_method": str,
    "recompute_num_layers": int,
    "cp_comm_type": str,
    "train_iters": int,
    "world_size": int,
    "ddp_bucket_size": int,
}
"""Arguments optnet reads, with the type of their value."""

FLAGS = (
    "group_query_attention",
    "swiglu",
    "sequence_parallel",
    "untie_embeddings_and_output_weights",
    "bf16",
    "fp16",
    "use_distributed_optimizer",
    "grad_reduce_in_bf16",
    "accumulate_allreduce_grads_in_fp32",
    "overlap_grad_reduce",
)
"""Store-true arguments optnet reads."""

REFUSED = {
    "num_layers_per_virtual_pipeline_stage": "interleaved pipeline schedules are not modelled",
    "num_virtual_stages_per_pipeline_rank": "interleaved pipeline schedules are not modelled",
    "decoder_first_pipeline_num_layers": "uneven pipeline stages are not modelled",
    "decoder_last_pipeline_num_layers": "uneven pipeline stages are not modelled",
    "num_layers_in_first_pipeline_stage": "uneven pipeline stages are not modelled",
    "num_layers_in_last_pipeline_stage": "uneven pipeline stages are not modelled",
    "moe_shared_expert_intermediate_size": "shared experts are not modelled",
    "multi_latent_attention": "multi-latent attention is not modelled",
    "mtp_num_layers": "multi-token prediction layers are not modelled",
    "tp_comm_overlap": "tensor-parallel communication/GEMM overlap is not modelled",
    "use_torch_fsdp2": "FSDP is not modelled (use data_parallel: zero3 by hand)",
    "use_megatron_fsdp": "FSDP is not modelled (use data_parallel: zero3 by hand)",
    "expert_tensor_parallel_num_weight_shards": "expert weight sharding is not modelled",
    "hierarchical_context_parallel_sizes": "hierarchical context parallelism is not modelled",
    "attention_output_gate": "gated attention output is not modelled",
}
"""Arguments that change the communication in ways the shorthand cannot represent."""

_IGNORED_NAMES = """
    lr min_lr lr_decay_style lr_decay_iters lr_decay_samples lr_warmup_iters lr_warmup_fraction
    lr_warmup_samples lr_wsd_decay_style lr_wsd_decay_iters weight_decay start_weight_decay
    end_weight_decay weight_decay_incr_style clip_grad adam_beta1 adam_beta2 adam_eps optimizer
    sgd_momentum init_method_std seed loss_scale initial_loss_scale min_loss_scale
    loss_scale_window hysteresis attention_dropout hidden_dropout
    position_embedding_type rotary_base rotary_percent rotary_seq_len_interpolation_factor
    use_rotary_position_embeddings no_position_embedding rope_scaling rope_scaling_factor
    normalization norm_epsilon layernorm_epsilon apply_layernorm_1p qk_layernorm
    disable_bias_linear add_bias_linear add_qkv_bias no_bias_gelu_fusion no_bias_dropout_fusion
    no_bias_swiglu_fusion no_masked_softmax_fusion no_rope_fusion attention_softmax_in_fp32
    apply_query_key_layer_scaling use_flash_attn attention_backend transformer_impl
    use_mcore_models use_legacy_models no_gradient_accumulation_fusion
    cross_entropy_loss_fusion cross_entropy_fusion_impl distributed_backend
    distributed_timeout_minutes overlap_param_gather
    overlap_param_gather_with_optimizer_step align_grad_reduce align_param_gather
    ddp_average_in_collective check_for_nan_in_loss_and_grad
    data_path train_data_path valid_data_path test_data_path split data_cache_path mock_data
    dataloader_type num_workers no_create_attention_mask_in_dataloader
    tokenizer_type tokenizer_model vocab_file merge_file vocab_extra_ids
    save load save_interval pretrained_checkpoint ckpt_format no_load_optim no_load_rng
    no_save_optim no_save_rng finetune auto_detect_ckpt_format dist_ckpt_strictness
    log_interval eval_interval eval_iters log_throughput log_params_norm log_num_zeros_in_grad
    log_timers_to_tensorboard log_validation_ppl_to_tensorboard log_memory_to_tensorboard
    log_world_size_to_tensorboard tensorboard_dir tensorboard_log_interval
    tensorboard_queue_size timing_log_level timing_log_option wandb_project wandb_exp_name
    wandb_save_dir exit_interval exit_duration_in_mins exit_signal_handler manual_gc
    manual_gc_interval profile profile_step_start profile_step_end use_pytorch_profiler
    moe_router_load_balancing_type moe_aux_loss_coeff moe_z_loss_coeff moe_grouped_gemm
    moe_router_pre_softmax moe_permute_fusion moe_router_dtype moe_router_score_function
    moe_router_topk_scaling_factor moe_input_jitter_eps moe_token_drop_policy
    moe_pad_expert_input_to_capacity moe_router_enable_expert_bias moe_router_bias_update_rate
    moe_per_layer_logging moe_layer_recompute
    use_checkpoint_opt_param_scheduler override_opt_param_scheduler
    calculate_per_token_loss bf16_grads init_model_with_meta_device
    """
IGNORED = frozenset(_IGNORED_NAMES.split())
"""Arguments that do not change the per-iteration collectives or compute in this model (learning
rate, data, logging, checkpointing, fusions, numerics, load-balancing losses). The overlap flags
(``--overlap-param-gather``; ``--overlap-grad-reduce`` only sets the bucket size) are not
converted because the overlapped fraction cannot be derived from a flag: set
``overlap_grad_sync`` / ``overlap_param_gather`` in the written YAML by hand."""

MIB = 1024 * 1024
SINGLE_BUCKET_MB = 1e9
"""Megatron-LM's DDP puts all gradients in one bucket without ``--overlap-grad-reduce``
(megatron/core/distributed/distributed_data_parallel.py); 1e9 MiB is one bucket for any model."""

MOE_DISPATCHERS_MODELLED = ("alltoall",)


def _canon(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


def parse_args(tokens: list[str]) -> dict[str, Any]:
    """Parse a Megatron-LM argument list (``--name value``, ``--name=value``, ``--flag``) into
    ``{name_with_underscores: value}``; values of known arguments are typed, unknown names are
    refused. ``--cp-comm-type`` may take several values (one per layer), as in Megatron."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            raise MegatronArgsError(f"expected an argument name (--...), got {tok!r}")
        name, eq, inline = tok.partition("=")
        key = _canon(name)
        i += 1
        values: list[str] = []
        if eq:
            values = [inline]
        else:
            while i < len(tokens) and not tokens[i].startswith("--"):
                values.append(tokens[i])
                i += 1
        if key in out:
            raise MegatronArgsError(f"--{key.replace('_', '-')} is given twice")
        out[key] = values
    return {k: _typed(k, v) for k, v in out.items()}


def _typed(key: str, values: Any) -> Any:
    flag = "--" + key.replace("_", "-")
    if key in FLAGS:
        if isinstance(values, bool):
            return values
        if values in ([], None):
            return True
        if isinstance(values, list) and len(values) == 1 and values[0] in ("true", "false"):
            return values[0] == "true"
        raise MegatronArgsError(f"{flag} is a flag and takes no value, got {values!r}")
    if key in VALUED:
        if isinstance(values, list):
            if key == "cp_comm_type":
                if not values:
                    raise MegatronArgsError(f"{flag} needs a value")
                return [str(v) for v in values]
            if len(values) != 1:
                raise MegatronArgsError(f"{flag} takes one value, got {values!r}")
            values = values[0]
        if key == "cp_comm_type":
            return [str(values)]
        typ = VALUED[key]
        try:
            if typ is int and isinstance(values, float | bool):
                raise ValueError
            v = typ(values)
        except (TypeError, ValueError):
            raise MegatronArgsError(
                f"{flag} must be {'an integer' if typ is int else 'a number'}, got {values!r}"
            ) from None
        if typ is float and not math.isfinite(v):
            raise MegatronArgsError(f"{flag} must be finite, got {values!r}")
        return v
    if key in REFUSED:
        return values
    if key in IGNORED:
        return values
    raise MegatronArgsError(
        f"unknown argument {flag} (not a Megatron-LM argument optnet knows; the ones it reads "
        "and ignores are listed in docs/workloads.md)"
    )


def load_args_file(path: str | Path) -> dict[str, Any]:
    """Read Megatron-LM arguments from a YAML file: a mapping ``{name: value}`` (names with or
    without leading dashes, hyphens or underscores; ``true`` for flags), a list of tokens, or a
    string holding a command line."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MegatronArgsError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(data, str):
        return parse_args(shlex.split(data))
    if isinstance(data, list):
        return parse_args([str(x) for x in data])
    if not isinstance(data, dict):
        raise MegatronArgsError("expected a mapping of Megatron-LM argument names to values")
    out: dict[str, Any] = {}
    for raw, value in data.items():
        key = _canon(str(raw))
        if key in out:
            raise MegatronArgsError(f"--{key.replace('_', '-')} is given twice")
        if key in FLAGS and value is False:
            continue
        out[key] = _typed(key, value)
    return out


def padded_vocab(vocab_size: int, divisible_by: int, tp: int) -> int:
    """Megatron-LM ``vocab_size_with_padding``: round V up to a multiple of
    make_vocab_size_divisible_by * tp (megatron/core/tokenizers/utils/build_tokenizer.py)."""
    multiple = divisible_by * tp
    return int(math.ceil(vocab_size / multiple) * multiple)


def _need(args: dict[str, Any], key: str) -> Any:
    if key not in args:
        raise MegatronArgsError(f"--{key.replace('_', '-')} is required")
    return args[key]


def _flag(args: dict[str, Any], key: str) -> bool:
    return bool(args.get(key, False))


def to_workload(
    args: dict[str, Any],
    gpus: int | None = None,
    name: str = "megatron",
    expand: bool = False,
) -> dict[str, Any]:
    """The ``workload:`` section (``{"jobs": [job]}``) for parsed Megatron-LM ``args``.

    ``gpus`` is the world size (``--world-size`` inside ``args`` is accepted too);
    dp = gpus / (tp * cp * pp) as Megatron's ``initialize_model_parallel`` computes it.
    """
    refused = sorted(k for k in args if k in REFUSED)
    if refused:
        raise MegatronArgsError(
            "; ".join(f"--{k.replace('_', '-')}: {REFUSED[k]}" for k in refused)
        )
    world = args.get("world_size")
    if gpus is not None and world is not None and gpus != world:
        raise MegatronArgsError(f"--gpus {gpus} contradicts --world-size {world}")
    gpus = gpus if gpus is not None else world
    if gpus is None:
        raise MegatronArgsError("the world size is required: give --gpus N (or --world-size N)")
    if gpus < 1:
        raise MegatronArgsError(f"the world size must be >= 1, got {gpus}")

    tp = args.get("tensor_model_parallel_size", 1)
    pp = args.get("pipeline_model_parallel_size", 1)
    cp = args.get("context_parallel_size", 1)
    ep = args.get("expert_model_parallel_size", 1)
    for key, v in (
        ("tensor_model_parallel_size", tp),
        ("pipeline_model_parallel_size", pp),
        ("context_parallel_size", cp),
        ("expert_model_parallel_size", ep),
    ):
        if v < 1:
            raise MegatronArgsError(f"--{key.replace('_', '-')} must be >= 1, got {v}")
    model = tp * cp * pp
    if gpus % model:
        raise MegatronArgsError(
            f"world size {gpus} is not divisible by tp * cp * pp = {tp} * {cp} * {pp} = {model}"
        )
    dp = gpus // model
    etp = args.get("expert_tensor_parallel_size", tp)
    if etp != tp:
        raise MegatronArgsError(
            f"--expert-tensor-parallel-size {etp} differs from --tensor-model-parallel-size "
            f"{tp}; only expert tp = tp is modelled"
        )

    layers = _need(args, "num_layers")
    hidden = _need(args, "hidden_size")
    heads = _need(args, "num_attention_heads")
    seq = _need(args, "seq_length")
    mbs = _need(args, "micro_batch_size")
    gbs = args.get("global_batch_size", mbs * dp)  # Megatron's default
    if hidden % heads:
        raise MegatronArgsError(
            f"--hidden-size {hidden} is not divisible by --num-attention-heads {heads}"
        )
    kv_channels = args.get("kv_channels", hidden // heads)
    if kv_channels * heads != hidden:
        raise MegatronArgsError(
            f"--kv-channels {kv_channels} x --num-attention-heads {heads} != --hidden-size "
            f"{hidden}; only a query projection of size hidden is modelled"
        )
    swiglu = _flag(args, "swiglu")
    ffn = args.get("ffn_hidden_size")
    if ffn is None:  # megatron/training/arguments.py validate_args
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
    kv_heads = None
    if _flag(args, "group_query_attention"):
        kv_heads = _need(args, "num_query_groups")
    # Without --group-query-attention Megatron passes num_query_groups=None, i.e. multi-head
    # attention, whatever --num-query-groups says (megatron/training/argument_utils.py).

    if "padded_vocab_size" in args:
        vocab = args["padded_vocab_size"]
    else:
        if "vocab_size" not in args:
            raise MegatronArgsError(
                "--vocab-size (or --padded-vocab-size) is required: Megatron-LM reads the "
                "vocabulary from the tokenizer, which optnet does not load"
            )
        vocab = padded_vocab(args["vocab_size"], args.get("make_vocab_size_divisible_by", 128), tp)

    if _flag(args, "fp16") and _flag(args, "bf16"):
        raise MegatronArgsError("--fp16 and --bf16 are exclusive")
    bpp = 2 if (_flag(args, "fp16") or _flag(args, "bf16")) else 4
    grad_bpp = bpp
    if _flag(args, "bf16") and not _flag(args, "grad_reduce_in_bf16"):
        grad_bpp = 4  # bf16 gradients are accumulated and reduced in fp32 (arguments.py)
    if _flag(args, "accumulate_allreduce_grads_in_fp32"):
        grad_bpp = 4

    recompute = False
    gran = args.get("recompute_granularity")
    if gran is not None and gran not in ("full", "selective"):
        raise MegatronArgsError(f"--recompute-granularity must be full or selective, not {gran!r}")
    if gran == "full":
        method = args.get("recompute_method")
        if method not in ("uniform", "block"):
            raise MegatronArgsError(
                "--recompute-granularity full needs --recompute-method uniform or block"
            )
        n = args.get("recompute_num_layers", 1)
        if method == "block" and n < layers // pp:
            raise MegatronArgsError(
                f"--recompute-method block with --recompute-num-layers {n} < layers per stage "
                f"({layers // pp}): partial recomputation is not modelled"
            )
        recompute = True
    # selective recomputation re-runs core attention only: no collective is repeated.

    spec: dict[str, Any] = {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "seq_len": seq,
        "vocab": vocab,
        "ffn_hidden": ffn,
        "global_batch": gbs,
        "micro_batch": mbs,
        "bytes_per_param": bpp,
    }
    if kv_heads is not None:
        spec["kv_heads"] = kv_heads
    if grad_bpp != bpp:
        spec["grad_bytes_per_param"] = grad_bpp
    if swiglu:
        spec["gated_mlp"] = True
    if _flag(args, "untie_embeddings_and_output_weights"):
        spec["tie_embeddings"] = False
    if tp > 1 and _flag(args, "sequence_parallel"):
        spec["sequence_parallel"] = True  # Megatron turns it off when tp = 1
    if recompute:
        spec["recompute"] = True
    if _flag(args, "use_distributed_optimizer"):
        spec["data_parallel"] = "zero1"  # reduce-scatter gradients, all-gather parameters
    elif _flag(args, "overlap_grad_reduce"):
        # Megatron DDP bucket: ddp_bucket_size parameters, default max(4e7, 1e6 x dp group size)
        # (megatron/core/distributed/distributed_data_parallel.py: its dp_group, without cp).
        elements = args.get("ddp_bucket_size", max(40_000_000, 1_000_000 * dp))
        spec["bucket_mb"] = elements * grad_bpp / MIB
    else:
        spec["bucket_mb"] = SINGLE_BUCKET_MB
    if cp > 1:
        types = args.get("cp_comm_type", ["p2p"])
        if len(set(types)) != 1:
            raise MegatronArgsError(
                f"--cp-comm-type differs between layers ({types}); not modelled"
            )
        if types[0] not in ("p2p", "all_gather"):
            raise MegatronArgsError(
                f"--cp-comm-type {types[0]}: only p2p and all_gather are modelled"
            )
        if types[0] != "p2p":
            spec["cp_comm"] = types[0]

    experts = args.get("num_experts")
    if experts is None:
        if ep > 1:
            raise MegatronArgsError("--expert-model-parallel-size > 1 needs --num-experts")
        for key in ("moe_router_topk", "moe_expert_capacity_factor", "moe_ffn_hidden_size"):
            if key in args:
                raise MegatronArgsError(f"--{key.replace('_', '-')} needs --num-experts")
    else:
        freq = args.get("moe_layer_freq", 1)
        if freq != 1:
            raise MegatronArgsError(
                f"--moe-layer-freq {freq}: only 1 (every layer MoE) is modelled (Megatron "
                "counts layers from 0, optnet's moe_layer_interval from 1)"
            )
        moe_ffn = args.get("moe_ffn_hidden_size", ffn)
        if moe_ffn != ffn:
            raise MegatronArgsError(
                f"--moe-ffn-hidden-size {moe_ffn} differs from --ffn-hidden-size {ffn}; not "
                "modelled"
            )
        dispatcher = args.get("moe_token_dispatcher_type", "allgather")  # Megatron's default
        if (ep > 1 or tp > 1) and dispatcher not in MOE_DISPATCHERS_MODELLED:
            raise MegatronArgsError(
                f"--moe-token-dispatcher-type {dispatcher} (Megatron's default is allgather): "
                "only alltoall is modelled; pass --moe-token-dispatcher-type alltoall"
            )
        spec.update(
            num_experts=experts,
            moe_top_k=args.get("moe_router_topk", 2),  # Megatron's default is 2
            moe_layer_interval=1,
        )
        if "moe_expert_capacity_factor" in args:
            spec["moe_capacity_factor"] = args["moe_expert_capacity_factor"]

    try:
        ts = TransformerSpec.model_validate(spec)
        compute_us, colls = derive(ts, tp, pp, dp, ep, cp)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise MegatronArgsError(f"the arguments describe no valid layout: {_first(exc)}") from None

    parallelism = {"tp": tp, "pp": pp, "dp": dp}
    if ep > 1:
        parallelism["ep"] = ep
    if cp > 1:
        parallelism["cp"] = cp
    job: dict[str, Any] = {"name": name, "gpus": gpus, "parallelism": parallelism}
    if "train_iters" in args:
        job["iterations"] = args["train_iters"]
    if expand:
        job["compute_time_us"] = compute_us
        job["collectives"] = colls
    else:
        job["transformer"] = spec
    return {"jobs": [job]}


def _first(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            e = errors()[0]
            loc = ".".join(str(x) for x in e.get("loc", ()))
            return f"{loc}: {e['msg']}" if loc else str(e["msg"])
        except (IndexError, KeyError, TypeError):
            pass
    return str(exc).splitlines()[0]


def workload_yaml(workload: dict[str, Any], source: str) -> str:
    """The workload as YAML with a header comment naming where it came from."""
    body = yaml.safe_dump(workload, sort_keys=False, default_flow_style=False, width=100)
    return f"# optnet import megatron {source}\n{body}"
