"""Operator exports (docs/operator.md): ``hostfile``, ``ocs`` and ``wdm``, each read back with the
csv/json modules and compared with the results file it came from.

Formats checked against their documentation:

* OpenMPI rankfile: ``rank <N>=<hostname> slot=<slot list>``, a slot list of logical cores
  ``[package:]core[-core][,...]`` that must not overlap between ranks of a host (open-mpi/ompi
  docs/man-openmpi/man1/mpirun.1.rst, "Rankfiles").
* OpenMPI hostfile: ``host slots=N`` lines, ``#`` comments (open-mpi/ompi
  docs/launching-apps/scheduling.rst).
* SLURM_HOSTFILE for ``srun --distribution=arbitrary``: one host per line, task i on line i
  (srun(1), https://slurm.schedmd.com/srun.html, ``--distribution`` ``arbitrary``).
* Megatron-LM's groups: ``megatron_groups`` below re-derives what
  NVIDIA/Megatron-LM megatron/core/parallel_state.py ``generate_masked_orthogonal_rank_groups``
  documents (global rank = sum of axis index x prefix product of the sizes in ``order``; a group
  varies the masked axes and fixes the others), for the dense generator (order tp-cp-dp-pp,
  ep = 1) and the expert generator (order tp-ep-dp-pp, expert tp = tp, expert dp =
  world / (tp ep pp)).
"""

from __future__ import annotations

import csv
import dataclasses
import fcntl
import io
import itertools
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES

from optnet.candidates import rank_groups
from optnet.cli import main
from optnet.commands import export_cmd
from optnet.export.hostfile import HOSTNAME
from optnet.instance import load_instance

if export_cmd.name not in main.commands:  # until cli.py registers it
    main.add_command(export_cmd)

FORMATS = ("hostfile", "ocs", "wdm")


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """realistic (static plan, loopbacks), reconfig (two phases) and a tiny variant with a job
    on half a server: solved, and exported in every operator format. Under pytest-xdist the
    workers share one copy (built once, under a lock, in the session's shared temp folder)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    d = root / "operator-exports"
    with open(root / "operator-exports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / "done").exists():
            d.mkdir(exist_ok=True)
            _build(d)
            (d / "done").write_text("")
    return {
        name: {
            "inst": load_instance(src),
            "src": src,
            "res_path": d / f"{name}.json",
            "results": json.loads((d / f"{name}.json").read_text()),
            "dirs": {fmt: d / f"{name}-{fmt}" for fmt in FORMATS},
        }
        for name, src in _sources(d).items()
    }


def _sources(d: Path) -> dict[str, Path]:
    return {
        "realistic": INSTANCES / "realistic.yaml",
        "reconfig": INSTANCES / "reconfig.yaml",
        "half": d / "half.yaml",
    }


def _build(d: Path) -> None:
    data = yaml.safe_load((INSTANCES / "tiny.yaml").read_text())
    data["workload"]["jobs"][1].update(gpus=2, parallelism={"tp": 2, "dp": 1})
    data["workload"]["jobs"][1]["collectives"] = [
        {"name": "tp_ar", "kind": "all_reduce", "group": "tp", "message_bytes": 4.0e6}
    ]
    (d / "half.yaml").write_text(yaml.safe_dump(data))
    for name, src in _sources(d).items():
        res = d / f"{name}.json"
        r = run("solve", str(src), "-o", str(res), "--time-limit", "5", "--force")
        assert r.exit_code in (0, 1), r.output
        for fmt in FORMATS:
            out = d / f"{name}-{fmt}"
            r = run(
                "export",
                str(res),
                "--format",
                fmt,
                "-o",
                str(out),
                "--instance",
                str(src),
                "--force",
            )
            assert r.exit_code == 0, r.output


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _plans(results: dict) -> list[tuple[str, list, list]]:
    if results.get("phases"):
        return [(p["phase"], p["circuits"], p["lightpaths"]) for p in results["phases"]]
    return [("static", results["circuits"], results["lightpaths"])]


# --- hostfile ---------------------------------------------------------------------------------

RANGE = r"\d+(?:-\d+)?"
SLOT_LIST = rf"(?:\d+:)?{RANGE}(?:,{RANGE})*"
RANKFILE_LINE = re.compile(rf"^rank (\d+)=(\S+) slot=({SLOT_LIST})$")


def _cores(slot: str) -> set[int]:
    body = slot.split(":", 1)[-1]
    out = set()
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def parse_rankfile(text: str) -> dict[int, tuple[str, str]]:
    ranks: dict[int, tuple[str, str]] = {}
    for line in text.splitlines():
        m = RANKFILE_LINE.match(line)
        assert m, f"not OpenMPI rankfile syntax: {line!r}"
        r = int(m.group(1))
        assert r not in ranks, f"rank {r} twice"
        ranks[r] = (m.group(2), m.group(3))
    return ranks


def parse_hostfile(text: str) -> list[tuple[str, int]]:
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"(\S+) slots=(\d+)", line)
        assert m, f"not an OpenMPI hostfile line: {line!r}"
        out.append((m.group(1), int(m.group(2))))
    return out


def source_env(path: Path) -> dict[str, str]:
    """The variables a POSIX shell sets from ``path`` (its syntax is checked by sh itself)."""
    script = f"set -a; . '{path}'; set +a; env -0"
    done = subprocess.run(["sh", "-c", script], capture_output=True, check=True, env={})
    pairs = [x.split("=", 1) for x in done.stdout.decode().split("\0") if "=" in x]
    return {k: v for k, v in pairs}


def job_ranks(results: dict, job: str) -> dict[int, tuple[str, int]]:
    return {r["rank"]: (r["server"], r["gpu"]) for r in results["placement"][job]["ranks"]}


@pytest.mark.parametrize("name", ["realistic", "reconfig", "half"])
def test_every_rank_once_where_the_results_put_it(solved, name):
    s = solved[name]
    res, d = s["results"], s["dirs"]["hostfile"]
    for job in res["placement"]:
        want = job_ranks(res, job)
        got = parse_rankfile((d / f"{job}.rankfile").read_text())
        assert sorted(got) == sorted(want) == list(range(len(want)))
        assert {r: h for r, (h, _slot) in got.items()} == {r: h for r, (h, _g) in want.items()}
        slurm = (d / f"{job}.slurm").read_text().splitlines()
        assert slurm == [want[r][0] for r in range(len(want))]  # task r on line r
        hosts = parse_hostfile((d / f"{job}.hostfile").read_text())
        by_slot = [h for h, n in hosts for _ in range(n)]  # --map-by slot fills hosts in order
        assert by_slot == slurm
        assert [h for h, _n in hosts] == list(dict.fromkeys(slurm))
        for h, _n in hosts:
            assert HOSTNAME.match(h)
        # OpenMPI refuses overlapping bindings: cores are distinct per host
        per_host: dict[str, set[int]] = {}
        for h, slot in got.values():
            cores = _cores(slot)
            assert not cores & per_host.get(h, set())
            per_host[h] = per_host.get(h, set()) | cores


def test_rankfile_cores_per_gpu(solved, tmp_path):
    s = solved["realistic"]
    r = run(
        "export", str(s["res_path"]), "--format", "hostfile", "-o", str(tmp_path),
        "--instance", str(s["src"]), "--cores-per-gpu", "4",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    got = parse_rankfile((tmp_path / "llm.rankfile").read_text())
    host0 = [(rk, slot) for rk, (h, slot) in sorted(got.items()) if h == got[0][0]]
    assert [_cores(slot) for _rk, slot in host0] == [
        set(range(4 * i, 4 * i + 4)) for i in range(len(host0))
    ]


@pytest.mark.parametrize("name", ["realistic", "reconfig", "half"])
def test_env_file_is_shell_and_matches_the_plan(solved, name):
    s = solved[name]
    inst, res, d = s["inst"], s["results"], s["dirs"]["hostfile"]
    G = inst.gpus_per_server
    for spec in inst.jobs:
        env = source_env(d / f"{spec.name}.env")
        want = job_ranks(res, spec.name)
        hosts = list(dict.fromkeys(want[r][0] for r in range(len(want))))
        assert env["OPTNET_JOB"] == spec.name
        assert int(env["WORLD_SIZE"]) == spec.gpus == len(want)
        assert env["NODE_LIST"].split(",") == hosts
        assert int(env["NNODES"]) == len(hosts)
        assert env["MASTER_ADDR"] == want[0][0]
        per = int(env["NPROC_PER_NODE"])
        assert per == min(spec.gpus, G)
        # rank = node rank * NPROC_PER_NODE + local rank, and local rank i uses GPU entry i
        gpus = [int(x) for x in env["OPTNET_LOCAL_RANK_GPUS"].split(",")]
        assert env["CUDA_VISIBLE_DEVICES"] == env["OPTNET_LOCAL_RANK_GPUS"]
        for r, (h, g) in want.items():
            node, local = divmod(r, per)
            assert hosts[node] == h and gpus[local] == g
        assert (
            int(env["TENSOR_MODEL_PARALLEL_SIZE"]),
            int(env["PIPELINE_MODEL_PARALLEL_SIZE"]),
        ) == (
            spec.tp,
            spec.pp,
        )
        assert int(env["DATA_PARALLEL_SIZE"]) == spec.dp
        assert int(env["EXPERT_MODEL_PARALLEL_SIZE"]) == spec.ep
        assert env["MEGATRON_RANK_ORDER"] == "tp-cp-ep-dp-pp"
        args = env["MEGATRON_PARALLEL_ARGS"].split()
        assert args[args.index("--tensor-model-parallel-size") + 1] == str(spec.tp)
        assert args[args.index("--expert-model-parallel-size") + 1] == str(spec.ep)


def test_half_server_job_sees_only_its_gpus(solved):
    s = solved["half"]
    env = source_env(s["dirs"]["hostfile"] / "infer.env")
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"  # 2 of the 4 GPUs of its server
    assert env["NPROC_PER_NODE"] == "2"
    hosts = parse_hostfile((s["dirs"]["hostfile"] / "infer.hostfile").read_text())
    assert len(hosts) == 1 and hosts[0][1] == 2


def test_parameter_servers_hold_no_ranks(tmp_path):
    src = INSTANCES / "ps.yaml"
    res = tmp_path / "ps.json"
    r = run("evaluate", str(src), str(INSTANCES / "ps-far.solution.json"), "-o", str(res))
    assert r.exit_code == 0, r.output
    r = run("export", str(res), "--format", "hostfile", "-o", str(tmp_path / "h"))
    assert r.exit_code == 0, r.output
    assert "parameter servers" in r.output  # the note, on stderr
    results = json.loads(res.read_text())
    for job, place in results["placement"].items():
        ps = place.get("ps_servers") or []
        env = source_env(tmp_path / "h" / f"{job}.env")
        assert env.get("OPTNET_PS_SERVERS", "").split(",") == ps != []
        slurm = set((tmp_path / "h" / f"{job}.slurm").read_text().split())
        assert slurm == set(place["servers"]) - set(ps)
        assert not {
            h for h, _n in parse_hostfile((tmp_path / "h" / f"{job}.hostfile").read_text())
        } & set(ps)


def megatron_groups(sizes: dict[str, int], order: str, token: str) -> list[frozenset[int]]:
    """Megatron-LM's rank groups for ``token`` (axes joined by '-') under ``order``."""
    axes = order.split("-")
    dims = [sizes[a] for a in axes]
    stride = list(itertools.accumulate([1] + dims[:-1], lambda a, b: a * b))
    masked = set(token.split("-"))
    groups: dict[tuple[int, ...], set[int]] = {}
    for idx in itertools.product(*(range(n) for n in dims)):
        rank = sum(i * st for i, st in zip(idx, stride))
        key = tuple(i for a, i in zip(axes, idx) if a not in masked)
        groups.setdefault(key, set()).add(rank)
    return [frozenset(g) for g in groups.values()]


def megatron_group(spec, group: str) -> list[frozenset[int]]:
    cp = getattr(spec, "cp", 1)
    if group == "world":
        return [frozenset(range(spec.gpus))]
    dense = {"tp": spec.tp, "cp": cp, "dp": spec.dp, "pp": spec.pp}
    if group in ("tp", "cp", "dp", "pp", "dp_cp"):
        return megatron_groups(dense, "tp-cp-dp-pp", group.replace("_", "-"))
    edp = spec.gpus // (spec.tp * spec.ep * spec.pp)
    expert = {"tp": spec.tp, "ep": spec.ep, "dp": edp, "pp": spec.pp}
    if group == "ep":
        return megatron_groups(expert, "tp-ep-dp-pp", "ep")
    if group == "edp":
        return megatron_groups(expert, "tp-ep-dp-pp", "dp")
    raise AssertionError(f"no Megatron group for {group!r}")


def test_megatron_groups_reproduce_the_documented_example():
    # parallel_state.py's docstring: order tp-pp-dp, sizes 2-2-2: dp groups [0,4] [1,5] [2,6] [3,7]
    got = megatron_groups({"tp": 2, "pp": 2, "dp": 2}, "tp-pp-dp", "dp")
    assert sorted(sorted(g) for g in got) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    # and [tp, dp, pp] = [2, 3, 4], dp: group 0 = [0, 2, 4], group 7 = [19, 21, 23]
    got = megatron_groups({"tp": 2, "dp": 3, "pp": 4}, "tp-dp-pp", "dp")
    assert [0, 2, 4] in [sorted(g) for g in got] and [19, 21, 23] in [sorted(g) for g in got]


def test_optnet_rank_numbering_is_megatrons_for_every_layout():
    """The hostfile writes optnet's rank numbering; over a grid of layouts every group kind
    optnet knows is the group Megatron-LM forms from that numbering."""
    base = load_instance(INSTANCES / "tiny.yaml").jobs[0]
    has_cp = "cp" in {f.name for f in dataclasses.fields(base)}
    kinds = ["world", "tp", "dp", "pp", "ep"] + (["cp", "dp_cp", "edp"] if has_cp else [])
    checked = 0
    for tp, cp, dp, pp, ep in itertools.product(
        [1, 2, 4], [1, 2] if has_cp else [1], [1, 2, 4], [1, 3], [1, 2, 4]
    ):
        if (dp * cp) % ep:
            continue
        extra = {"cp": cp} if has_cp else {}
        spec = dataclasses.replace(
            base, tp=tp, dp=dp, pp=pp, ep=ep, gpus=tp * cp * dp * pp, **extra
        )
        for g in kinds:
            assert {frozenset(x) for x in rank_groups(spec, g)} == set(megatron_group(spec, g)), (
                tp, cp, dp, pp, ep, g,
            )  # fmt: skip
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("name", ["realistic", "reconfig", "half"])
def test_every_priced_group_is_the_group_megatron_forms(solved, name):
    """Each collective optnet priced: its group instances (optnet's numbering) are Megatron's
    groups, and through the exported rankfile they span the servers and ranks it priced."""
    s = solved[name]
    inst, res, d = s["inst"], s["results"], s["dirs"]["hostfile"]
    checked = 0
    for c in res["collectives"]:
        spec = next(j for j in inst.jobs if j.name == c["job"])
        ours = {frozenset(g) for g in rank_groups(spec, c["group"])}
        theirs = set(megatron_group(spec, c["group"]))
        assert ours == theirs, (c["job"], c["group"])
        host = {
            r: h for r, (h, _s) in parse_rankfile((d / f"{spec.name}.rankfile").read_text()).items()
        }
        for g in theirs:
            assert len(g) == c["ranks"]
            assert len({host[r] for r in g}) == c["servers"], (c["job"], c["name"])
        checked += 1
    assert checked == len(res["collectives"]) > 0


# --- ocs --------------------------------------------------------------------------------------


def _xc_rows(s) -> dict[tuple[str, str], list[dict[str, str]]]:
    """(phase, ocs) -> cross-connect rows of the CSVs."""
    out: dict[tuple[str, str], list[dict[str, str]]] = {}
    for o in s["inst"].ocses:
        path = s["dirs"]["ocs"] / f"{o.name}.crossconnects.csv"
        if not path.exists():
            continue
        for row in _csv(path):
            out.setdefault((row["phase"], o.name), []).append(row)
    return out


@pytest.mark.parametrize("name", ["realistic", "reconfig"])
def test_port_numbering_is_the_instances(solved, name):
    s = solved[name]
    inst = s["inst"]
    rows = _csv(s["dirs"]["ocs"] / "ports.csv")
    for oi, o in enumerate(inst.ocses):
        reached = oi in inst.transceiver_ocs
        want = [r.name for r in inst.racks] if reached else []  # every rack has a trunk into it
        got = [(int(x["port"]), x["rack"], x["trunk"]) for x in rows if x["ocs"] == o.name]
        assert got == [(i, r, f"trunk {r}->{o.name}") for i, r in enumerate(want)]


@pytest.mark.parametrize("name", ["realistic", "reconfig"])
def test_every_circuit_once_per_phase_as_a_matching(solved, name):
    s = solved[name]
    inst, res = s["inst"], s["results"]
    rows = _xc_rows(s)
    ports = {(x["ocs"], x["rack"]): int(x["port"]) for x in _csv(s["dirs"]["ocs"] / "ports.csv")}
    doc = json.loads((s["dirs"]["ocs"] / "ocs.json").read_text())
    seen_keys = set()
    for phase, circuits, _lps in _plans(res):
        for o in inst.ocses:
            got = rows.get((phase, o.name), [])
            seen_keys.add((phase, o.name))
            ins = [int(x["in_port"]) for x in got]
            outs = [int(x["out_port"]) for x in got]
            assert len(set(ins)) == len(ins) and len(set(outs)) == len(outs)  # a matching
            assert all(0 <= p < o.ports for p in ins + outs)
            for x in got:
                assert ports[(o.name, x["in_rack"])] == int(x["in_port"])
                assert ports[(o.name, x["out_rack"])] == int(x["out_port"])
            want = []
            for c in circuits:
                if c["ocs"] != o.name:
                    continue
                ra, rb = c["racks"]
                want += [(ra, rb)] if ra == rb else [(ra, rb), (rb, ra)]
            assert sorted((x["in_rack"], x["out_rack"]) for x in got) == sorted(want)
            js = next(
                p
                for p in next(x for x in doc["ocses"] if x["ocs"] == o.name)["phases"]
                if p["phase"] == phase
            )
            assert [(x["in_port"], x["out_port"]) for x in js["cross_connects"]] == list(
                zip(ins, outs)
            )
    assert set(rows) <= seen_keys


@pytest.mark.parametrize("name", ["realistic", "reconfig"])
def test_every_lightpath_direction_through_its_cross_connect(solved, name):
    s = solved[name]
    inst, res = s["inst"], s["results"]
    rack = {sv.name: inst.racks[sv.rack].name for sv in inst.servers}
    rows = _xc_rows(s)
    for phase, _circuits, lps in _plans(res):
        signals = {}
        for (ph, o), got in rows.items():
            if ph != phase:
                continue
            for x in got:
                ws = x["wavelengths"].split(";") if x["wavelengths"] else []
                assert len(set(ws)) == len(ws)  # one fibre: no wavelength twice
                for lid, w, f, t in zip(
                    x["lightpaths"].split(";"), ws, x["from_transceivers"].split(";"),
                    x["to_transceivers"].split(";"),
                ):  # fmt: skip
                    key = (lid, f, t)
                    assert key not in signals
                    signals[key] = (o, x["in_rack"], x["out_rack"], int(w))
        want = {}
        for i, lp in enumerate(lps):
            (a, b), (ka, kb), (wab, wba) = lp["servers"], lp["transceivers"], lp["wavelengths"]
            want[(f"lp{i}", f"{a}#{ka}", f"{b}#{kb}")] = (lp["ocs"], rack[a], rack[b], wab)
            want[(f"lp{i}", f"{b}#{kb}", f"{a}#{ka}")] = (lp["ocs"], rack[b], rack[a], wba)
        assert signals == want


def test_static_plan_has_no_change_list(solved):
    s = solved["realistic"]
    assert not (s["dirs"]["ocs"] / "changes.csv").exists()
    assert json.loads((s["dirs"]["ocs"] / "ocs.json").read_text())["changes"] == []


def test_change_list_turns_each_phase_into_the_next(solved):
    s = solved["reconfig"]
    res = s["results"]
    rows = _xc_rows(s)
    phases = [p["phase"] for p in res["phases"]]
    state = {
        (ph, o): {(int(x["in_port"]), int(x["out_port"])) for x in got}
        for (ph, o), got in rows.items()
    }
    changes = _csv(s["dirs"]["ocs"] / "changes.csv")
    boundaries = list(dict.fromkeys(c["boundary"] for c in changes))
    assert boundaries == [f"{a}->{b}" for a, b in zip(phases, phases[1:] + phases[:1])]
    recon = {r["into_phase"]: r for r in res["reconfiguration"]}
    for h, ph in enumerate(phases):
        nxt = phases[(h + 1) % len(phases)]
        for o in s["inst"].ocses:
            cur = set(state.get((ph, o.name), set()))
            ops = [c for c in changes if c["boundary"] == f"{ph}->{nxt}" and c["ocs"] == o.name]
            assert [int(c["step"]) for c in ops] == list(range(1, len(ops) + 1))
            kinds = [c["op"] for c in ops]
            assert kinds == sorted(kinds, key=lambda k: k != "disconnect")  # disconnects first
            for c in ops:
                xc = (int(c["in_port"]), int(c["out_port"]))
                if c["op"] == "disconnect":
                    cur.remove(xc)
                else:  # both ports free when connected
                    assert all(p != xc[0] for p, _q in cur) and all(q != xc[1] for _p, q in cur)
                    cur.add(xc)
            assert cur == state.get((nxt, o.name), set())
            # circuit level: what the evaluator reported for that boundary
            ev = next((x for x in recon[nxt]["ocs"] if x["ocs"] == o.name), None)
            up = {frozenset((c["in_rack"], c["out_rack"])) for c in ops if c["op"] == "connect"}
            down = {
                frozenset((c["in_rack"], c["out_rack"])) for c in ops if c["op"] == "disconnect"
            }
            assert up == {frozenset(p) for p in (ev["set_up"] if ev else [])}
            assert down == {frozenset(p) for p in (ev["torn_down"] if ev else [])}


# --- wdm --------------------------------------------------------------------------------------


def _thz(w: int, spacing_ghz: float) -> float:
    """optnet wavelength w: 191.3 THz + (w + 1) x spacing (docs/interfaces.md, GNPy's grid)."""
    return 191.3 + (w + 1) * spacing_ghz / 1000.0


@pytest.mark.parametrize("name", ["realistic", "reconfig"])
def test_every_lightpath_once_with_matching_channels(solved, name):
    s = solved[name]
    inst, res = s["inst"], s["results"]
    rows = _csv(s["dirs"]["wdm"] / "wdm.csv")
    doc = json.loads((s["dirs"]["wdm"] / "wdm.json").read_text())
    T = len(inst.transceiver_ocs)
    plans = _plans(res)
    assert len(rows) == len(inst.servers) * T * len(plans)
    for phase, _c, lps in plans:
        mine = [r for r in rows if r["phase"] == phase]
        assert sorted((r["server"], int(r["transceiver"])) for r in mine) == sorted(
            (sv.name, k) for sv in inst.servers for k in range(T)
        )
        for r in mine:
            assert r["ocs"] == inst.ocses[inst.transceiver_ocs[int(r["transceiver"])]].name
        lit = [r for r in mine if r["state"] == "lit"]
        assert len(lit) == 2 * len(lps)
        by_lp: dict[str, list[dict[str, str]]] = {}
        for r in lit:
            by_lp.setdefault(r["lightpath"], []).append(r)
        assert sorted(by_lp) == sorted(f"lp{i}" for i in range(len(lps)))
        for i, lp in enumerate(lps):
            ends = by_lp[f"lp{i}"]
            assert len(ends) == 2
            a = next(
                e
                for e in ends
                if (e["server"], int(e["transceiver"])) == (lp["servers"][0], lp["transceivers"][0])
            )
            b = next(
                e
                for e in ends
                if (e["server"], int(e["transceiver"])) == (lp["servers"][1], lp["transceivers"][1])
            )
            assert (a["peer_server"], b["peer_server"]) == (b["server"], a["server"])
            assert a["ocs"] == b["ocs"] == lp["ocs"]
            assert int(a["tx_wavelength"]) == int(b["rx_wavelength"]) == lp["wavelengths"][0]
            assert int(b["tx_wavelength"]) == int(a["rx_wavelength"]) == lp["wavelengths"][1]
            assert a["tx_thz"] == b["rx_thz"] and a["rx_thz"] == b["tx_thz"]
            assert float(a["tx_thz"]) == pytest.approx(_thz(lp["wavelengths"][0], 50.0), abs=1e-9)
        js = [x for x in doc["lightpaths"] if x["phase"] == phase]
        assert [x["lightpath"] for x in js] == [f"lp{i}" for i in range(len(lps))]
        for x, lp in zip(js, lps):
            assert [e["server"] for e in x["ends"]] == lp["servers"]
            assert [e["tx"] for e in x["ends"]] == lp["wavelengths"]


def test_wdm_spacing_option(solved, tmp_path):
    s = solved["reconfig"]
    r = run(
        "export", str(s["res_path"]), "--format", "wdm", "-o", str(tmp_path),
        "--instance", str(s["src"]), "--spacing-ghz", "100",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "wdm.json").read_text())
    assert doc["grid"]["spacing_ghz"] == 100.0 and doc["grid"]["flexi_m"] == 8
    for r in _csv(tmp_path / "wdm.csv"):
        if r["state"] == "lit":
            w = int(r["tx_wavelength"])
            assert float(r["tx_thz"]) == pytest.approx(_thz(w, 100.0), abs=1e-9)
            # ITU-T flexible grid: 193.1 THz + N x 6.25 GHz
            assert float(r["tx_thz"]) == pytest.approx(193.1 + int(r["tx_flexi_n"]) * 0.00625)


# --- refusals ---------------------------------------------------------------------------------


def _broken(s, tmp_path, change) -> Path:
    data = json.loads(s["res_path"].read_text())
    change(data)
    p = tmp_path / "broken.json"
    p.write_text(json.dumps(data))
    return p


def _refused(s, path: Path, fmt: str, tmp_path) -> str:
    r = run(
        "export",
        str(path),
        "--format",
        fmt,
        "-o",
        str(tmp_path / "out"),
        "--instance",
        str(s["src"]),
    )
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert not (tmp_path / "out").exists()  # nothing written
    return r.output


def test_hostfile_refuses_results_without_ranks(solved, tmp_path):
    s = solved["realistic"]
    p = _broken(s, tmp_path, lambda d: d["placement"]["moe"].update(ranks=[]))
    out = _refused(s, p, "hostfile", tmp_path)
    assert "placement.moe.ranks" in out and "empty" in out


def test_hostfile_refuses_a_missing_rank(solved, tmp_path):
    s = solved["realistic"]
    p = _broken(s, tmp_path, lambda d: d["placement"]["vision"]["ranks"].pop(5))
    out = _refused(s, p, "hostfile", tmp_path)
    assert "placement.vision.ranks" in out and "missing [5]" in out


def test_hostfile_refuses_ranks_off_the_priced_layout(solved, tmp_path):
    s = solved["realistic"]

    def swap(d):
        ranks = d["placement"]["llm"]["ranks"]
        ranks[0]["server"], ranks[8]["server"] = ranks[8]["server"], ranks[0]["server"]

    out = _refused(s, _broken(s, tmp_path, swap), "hostfile", tmp_path)
    assert "rank 0" in out and "docs/model.md" in out


def test_ocs_and_wdm_refuse_a_plan_without_optics(solved, tmp_path):
    s = solved["realistic"]
    p = _broken(s, tmp_path, lambda d: d.update(circuits=[], lightpaths=[]))
    assert "no OCS circuit" in _refused(s, p, "ocs", tmp_path)
    assert "lights no lightpath" in _refused(s, p, "wdm", tmp_path)


def test_ocs_refuses_ports_off_the_numbering_or_used_twice(solved, tmp_path):
    s = solved["reconfig"]

    def renumber(d):
        d["phases"][1]["circuits"][0]["ports"] = [1, 3]

    out = _refused(s, _broken(s, tmp_path, renumber), "ocs", tmp_path)
    assert "phases[1].circuits[0].ports" in out and "i-th rack" in out

    racks = [r.name for r in s["inst"].racks]  # port i of an OCS is its i-th rack

    def twice(d):  # the first circuit's first port again, towards a rack it does not face
        c = dict(d["phases"][0]["circuits"][0])
        other = next(r for r in racks if r not in c["racks"])
        c["racks"], c["ports"] = [c["racks"][0], other], [c["ports"][0], racks.index(other)]
        c["attaches"] = []
        d["phases"][0]["circuits"].append(c)

    out = _refused(s, _broken(s, tmp_path, twice), "ocs", tmp_path)
    assert "not a matching" in out


def test_wdm_refuses_a_transceiver_on_the_wrong_ocs(solved, tmp_path):
    s = solved["reconfig"]

    def wrong(d):
        d["phases"][0]["lightpaths"][0]["transceivers"] = [2, 0]

    out = _refused(s, _broken(s, tmp_path, wrong), "wdm", tmp_path)
    assert "phases[0].lightpaths[0].transceivers" in out and "does not attach" in out


def test_hostnames_rule():
    for ok in ("ra-s0", "node1.example.com", "a"):
        assert HOSTNAME.match(ok)
    for bad in ("ra s0", "-ra", "ra-", "ra_s0", "a..b", "rank=1"):
        assert not HOSTNAME.match(bad)
