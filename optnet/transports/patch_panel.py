"""Patch-panel links: static point-to-point fibres between two racks, beside the OCS circuits
(docs/model.md §5.9). The worked example of a transport plug-in (``optnet.transports.base``).

``topology.patch_panels`` lists rack pairs joined by ``fibres`` duplex fibres each; every server
has ``ports_per_server`` patch ports (transceivers of their own, at ``rate_gbps``). The plan
patches k = 1..P fibres of a rack pair's panel between two servers of a slot pair (cabled
before the job starts, so the same in every phase); the pair then has a link of its own:

    alpha_pp(r,s) = overhead + 2 transceiver + FEC + length_km(r,s) d(fibre type)
    beta_pp(k)    = 1 / (k rate)

(no OCS on the way). A pair uses one transport: these links, lightpaths, the
wavelength-switched fabric or the packet fabric (``model/offers.py``).

Variables (over the pairs of every phase, P = ports_per_server)
    patch[p,k] in {0,1}   slot pair p has k = 0..P patched fibres
    patch_f[p,r,s] >= 0   the same count, on panel (r,s) when p sits at racks r and s
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from optnet.constants import inverse_rate_us_per_byte
from optnet.schema_types import Name, NonNegFloat, PositiveFloat, Strict
from optnet.transports.base import NO_LINK, Offer, PairLink

if TYPE_CHECKING:
    from collections.abc import Callable

    from optnet.instance import Instance, Rack

MB = 1e6  # the MILP counts bytes in MB (model/data.py)


class PanelSpec(Strict):
    """One panel: fibres between two racks."""

    racks: Annotated[list[Name], Field(min_length=2, max_length=2)]
    """The two racks the fibres join (the same name twice: fibres inside one rack)."""
    fibres: Annotated[int, Field(ge=1, le=100_000)]
    """Duplex fibres between them; each joins one patch port of each rack's servers."""
    length_km: NonNegFloat = 0.0
    """Length of a fibre (propagation at the fibre type's delay)."""
    fibre_type: Literal["smf", "hcf"] = "smf"
    """Standard single-mode or hollow-core fibre (``constants``' per-km delays)."""


class PatchPanels(Strict):
    """Static point-to-point fibres between racks, patched by hand before the jobs start."""

    panels: Annotated[list[PanelSpec], Field(min_length=1)]
    """The panels, at most one per pair of racks."""
    ports_per_server: Annotated[int, Field(ge=1, le=64)] = 1
    """Patch ports (transceivers of their own) on every server."""
    rate_gbps: PositiveFloat | None = None
    """Rate of a patched fibre; omitted: the transceivers' ``rate_gbps``."""


@dataclass(frozen=True)
class Panels:
    """The instance part: rack pair (r <= s) -> its fibres, their length and type."""

    fibres: dict[tuple[int, int], int]
    length_km: dict[tuple[int, int], float]
    fibre_type: dict[tuple[int, int], str]
    ports_per_server: int
    rate_gbps: float | None

    def propagation_us(self, inst: Instance, rs: tuple[int, int]) -> float:
        """length_km d(fibre type) of panel rs (the instance's per-km delays)."""
        return self.length_km[rs] * inst.fibre_delay_us_per_km(self.fibre_type[rs])


@dataclass(frozen=True, order=True)
class PatchLink:
    """``count`` fibres patched between servers ``server_a < server_b``."""

    server_a: int
    server_b: int
    count: int


@dataclass
class PanelData:
    """Coefficients of the rows (us, us per MB)."""

    ports: int
    alpha_us: dict[tuple[int, int], float]  # oriented rack pair with a panel -> alpha_pp
    beta: dict[int, float]  # k -> 1 / (k rate)
    fibres: dict[tuple[int, int], int]
    alphas: list[float]
    betas: list[float]


def _rate_gbps(inst: Instance, part: Panels) -> float:
    return part.rate_gbps or inst.transceiver_rate_gbps


def port_w(inst: Instance, part: Panels) -> float:
    """One lit patch port: ``power.transceiver_w``, else the default at the patch rate
    (``constants.transceiver_w_default``, as for the OCS transceivers)."""
    if inst.power.transceiver_w is not None:
        return inst.power.transceiver_w
    from optnet.constants import transceiver_w_default

    return transceiver_w_default(_rate_gbps(inst, part))


def fixed_latency_us(inst: Instance) -> float:
    """overhead + 2 transceiver + FEC: a lightpath's fixed latency less the OCS."""
    c = inst.constants
    return c.message_overhead_us + 2 * inst.transceiver_latency_us + c.fec_latency_us


class PatchPanelTransport:
    key = "patch_panels"
    feature = "patch-panel links"
    schema = PatchPanels
    doc = (
        "Static fibres patched between servers of two racks, beside the OCS circuits; none by "
        "default (docs/model.md §5.9)."
    )
    refused = {
        "explain": "its rows' duals are not attributed to a resource yet (§5.9)",
    }
    refused_with = {
        "direct-connect fabric": "a direct-connect cluster is solved for placement only and "
        "describes its own fibres (docs/direct.md)",
    }
    delegated: str | None = None

    # ------------------------------------------------------------------ input
    def part(
        self, spec: PatchPanels, racks: list[Rack], problem: Callable[[str, str], None]
    ) -> Panels:
        index = {r.name: i for i, r in enumerate(racks)}
        fibres: dict[tuple[int, int], int] = {}
        length: dict[tuple[int, int], float] = {}
        kind: dict[tuple[int, int], str] = {}
        first: dict[tuple[int, int], int] = {}
        for i, panel in enumerate(spec.panels):
            missing = [n for n in panel.racks if n not in index]
            if missing:
                problem(f"panels[{i}].racks", f"no rack named {missing[0]!r}")
                continue
            r, s = sorted(index[n] for n in panel.racks)
            if (r, s) in first:
                problem(
                    f"panels[{i}].racks",
                    f"panels[{first[(r, s)]}] already joins {panel.racks[0]} and "
                    f"{panel.racks[1]}: give one panel per pair of racks, with all its fibres",
                )
                continue
            first[(r, s)] = i
            fibres[(r, s)] = panel.fibres
            length[(r, s)], kind[(r, s)] = panel.length_km, panel.fibre_type
        return Panels(fibres, length, kind, spec.ports_per_server, spec.rate_gbps)

    def restrict(self, part: Panels, racks) -> Panels | None:
        """The panels between two mapped racks, renumbered (None: no panel left)."""
        keep = [rs for rs in part.fibres if rs[0] in racks and rs[1] in racks]
        if not keep:
            return None

        def new(rs: tuple[int, int]) -> tuple[int, int]:
            a, b = sorted((racks[rs[0]], racks[rs[1]]))
            return a, b

        return Panels(
            {new(rs): part.fibres[rs] for rs in keep},
            {new(rs): part.length_km[rs] for rs in keep},
            {new(rs): part.fibre_type[rs] for rs in keep},
            part.ports_per_server,
            part.rate_gbps,
        )

    def relaxed(self, part: Panels) -> Panels:
        """One panel inside rack 0 with every panel's fibres, the shortest length and the
        faster fibre type of any (min L_i d_i >= min L x min d): a real plan's fibres between
        any racks fit it, no slower."""
        one = (0, 0)
        hcf = "hcf" in part.fibre_type.values()
        return Panels(
            {one: sum(part.fibres.values())},
            {one: min(part.length_km.values())},
            {one: "hcf" if hcf else "smf"},
            part.ports_per_server,
            part.rate_gbps,
        )

    def racks_reached(self, inst: Instance, part: Panels) -> set[int]:
        return {r for rs in part.fibres for r in rs}

    # ------------------------------------------------------------------ MILP
    def model_data(self, md: Any) -> PanelData:
        inst, part = md.inst, md.inst.transports[self.key]
        fixed = fixed_latency_us(inst)
        alpha = {}
        for r, s in part.fibres:
            alpha[(r, s)] = alpha[(s, r)] = fixed + part.propagation_us(inst, (r, s))
        P, per_byte = self.slot_capacity(inst, part)
        beta = {k: b * MB for k, b in per_byte.items()}
        return PanelData(
            P, alpha, beta, dict(part.fibres), list(alpha.values()), list(beta.values())
        )

    def add_variables(self, m: Any, md: Any, data: PanelData) -> None:
        """patch[p,k] binary and patch_f[p,r,s] >= 0 over the pairs of every phase; rows:

        sum_k patch[p,k] = 1                                            (patch_count)
        sum_{k>=1} patch[p,k] <= sum_{(r,s) with a panel} w[p,r,s]      (patch_attachment)
        sum_{p containing slot v} sum_k k patch[p,k] <= P               (patch_ports)
        patch_f[p,r,s] >= sum_k k patch[p,k] - P (1 - w[p,r,s] - w[p,s,r])
                                               (patch_on_panel; r = s: w[p,r,r] once)
        sum_p patch_f[p,r,s] <= fibres(r,s)                             (panel_capacity)
        """
        import pyomo.environ as pyo

        P, panels = data.ports, sorted(data.fibres)
        pairs = sorted({p for ps in md.phase_pairs for p in ps})
        m.PP_PAIRS = pyo.Set(initialize=pairs, dimen=3, ordered=True)
        m.PP_COUNTS = pyo.Set(initialize=list(range(P + 1)), ordered=True)
        m.PP_PANELS = pyo.Set(initialize=panels, dimen=2, ordered=True)
        m.patch = pyo.Var(m.PP_PAIRS, m.PP_COUNTS, within=pyo.Binary)
        m.patch_f = pyo.Var(m.PP_PAIRS, m.PP_PANELS, within=pyo.NonNegativeReals)
        if not pairs:  # no slot pair to patch (every job on one server)
            return

        def count(m, j, a, b):
            return sum(k * m.patch[j, a, b, k] for k in m.PP_COUNTS if k)

        def at(m, j, a, b, r, s):
            return m.w[j, a, b, r, s] + (m.w[j, a, b, s, r] if r != s else 0)

        m.patch_count = pyo.Constraint(
            m.PP_PAIRS, rule=lambda m, j, a, b: sum(m.patch[j, a, b, k] for k in m.PP_COUNTS) == 1
        )
        m.patch_attachment = pyo.Constraint(
            m.PP_PAIRS,
            rule=lambda m, j, a, b: (
                sum(m.patch[j, a, b, k] for k in m.PP_COUNTS if k)
                <= sum(at(m, j, a, b, r, s) for r, s in panels)
            ),
        )

        def ports(m, j, v):
            mine = [p for p in md.pairs_of_slot[(j, v)] if p in m.PP_PAIRS]
            if not mine:
                return pyo.Constraint.Skip
            return sum(count(m, *p) for p in mine) <= P

        m.patch_ports = pyo.Constraint(m.SLOTS, rule=ports)
        m.patch_on_panel = pyo.Constraint(
            m.PP_PAIRS,
            m.PP_PANELS,
            rule=lambda m, j, a, b, r, s: (
                m.patch_f[j, a, b, r, s] >= count(m, j, a, b) - P * (1 - at(m, j, a, b, r, s))
            ),
        )
        m.panel_capacity = pyo.Constraint(
            m.PP_PANELS,
            rule=lambda m, r, s: (
                sum(m.patch_f[p + (r, s)] for p in m.PP_PAIRS) <= data.fibres[(r, s)]
            ),
        )

    def used(self, m: Any, md: Any, data: PanelData, h: int, p: tuple[int, int, int]) -> Any:
        """1 - patch[p,0] (the same in every phase: the fibres are static)."""
        return 1 - m.patch[p + (0,)]

    def offer(self, m: Any, md: Any, data: PanelData, h: int, p: tuple[int, int, int]) -> Offer:
        """alpha >= sum_{r,s} alpha_pp(r,s) w[p,r,s] - A patch[p,0]   (A = max alpha);
        beta >= sum_{k>=1} beta_pp(k) patch[p,k]: both slack when unused."""
        alpha = sum(a * m.w[p + rs] for rs, a in sorted(data.alpha_us.items()))
        return Offer(
            alpha - md.alpha_max * m.patch[p + (0,)],
            sum(b * m.patch[p + (k,)] for k, b in data.beta.items()),
        )

    def slot_capacity(self, inst: Instance, part: Panels) -> tuple[int, dict[int, float]]:
        P, rate = part.ports_per_server, _rate_gbps(inst, part)
        return P, {k: inverse_rate_us_per_byte(k * rate) for k in range(1, P + 1)}

    def decode(self, m: Any, md: Any, data: PanelData, placement) -> tuple:
        import pyomo.environ as pyo

        out = []
        for j, a, b in m.PP_PAIRS:
            k = next(k for k in m.PP_COUNTS if (pyo.value(m.patch[j, a, b, k]) or 0) > 0.5)
            if k:
                sa, sb = placement[j][a], placement[j][b]
                out.append(PatchLink(min(sa, sb), max(sa, sb), k))
        return tuple(sorted(out))

    def encode(self, m: Any, md: Any, data: PanelData, placement, decisions: tuple) -> list:
        count = {(lk.server_a, lk.server_b): lk.count for lk in decisions}
        out = []
        for j, a, b in m.PP_PAIRS:
            servers = placement.get(j)
            k = 0
            if servers is not None:
                k = count.get((min(servers[a], servers[b]), max(servers[a], servers[b])), 0)
            out += [(m.patch[j, a, b, kk], 1.0 if kk == k else 0.0) for kk in m.PP_COUNTS]
        return out

    def lit_terms(self, m: Any, md: Any, data: PanelData) -> list[tuple[int, Any, float]]:
        """(j, patch[p,k], 2 k port_w) for every pair p of job j and k >= 1: a patched fibre
        lights a port at each end."""
        w = port_w(md.inst, md.inst.transports[self.key])
        return [(p[0], m.patch[p + (k,)], 2 * k * w) for p in m.PP_PAIRS for k in m.PP_COUNTS if k]

    def lit_watts(self, inst: Instance, part: Panels, decisions: tuple, servers: set[int]) -> float:
        mine = sum(lk.count for lk in decisions if {lk.server_a, lk.server_b} <= servers)
        return 2 * mine * port_w(inst, part)

    # ------------------------------------------------------------------ changes (--from)
    def lost(self, inst: Instance, part: Panels, decisions: tuple) -> tuple:
        """The links with a server that failed (or was drained)."""

        def usable(s: int) -> bool:
            return s in inst.racks[inst.servers[s].rack].servers

        return tuple(lk for lk in decisions if not (usable(lk.server_a) and usable(lk.server_b)))

    def change_count(self, m: Any, md: Any, data: PanelData, previous: tuple, placement) -> Any:
        """sum_p dpatch[p],  dpatch[p] >= |sum_k k patch[p,k] - N0[p]|: fibres patched or
        unpatched per slot pair, N0[p] the running plan's between the pair's previous servers
        (counted per slot pair, as the lightpaths are: docs/model.md §5.6)."""
        import pyomo.environ as pyo

        before = {(lk.server_a, lk.server_b): lk.count for lk in previous}

        def n0(j: int, a: int, b: int) -> int:
            servers = placement.get(j)
            if servers is None or max(a, b) >= len(servers):
                return 0
            return before.get((min(servers[a], servers[b]), max(servers[a], servers[b])), 0)

        def now(m, j, a, b):
            return sum(k * m.patch[j, a, b, k] for k in m.PP_COUNTS if k)

        m.patch_change = pyo.Var(m.PP_PAIRS, within=pyo.NonNegativeReals)
        m.patch_change_up = pyo.Constraint(
            m.PP_PAIRS, rule=lambda m, *p: m.patch_change[p] >= now(m, *p) - n0(*p)
        )
        m.patch_change_down = pyo.Constraint(
            m.PP_PAIRS, rule=lambda m, *p: m.patch_change[p] >= n0(*p) - now(m, *p)
        )
        return sum(m.patch_change[p] for p in m.PP_PAIRS)

    def diff(self, inst: Instance, old: tuple, new: tuple) -> dict[str, list]:
        """One entry per fibre patched (``added``) or unpatched (``removed``)."""
        names = [sv.name for sv in inst.servers]
        a = Counter({(lk.server_a, lk.server_b): lk.count for lk in old})
        b = Counter({(lk.server_a, lk.server_b): lk.count for lk in new})

        def entries(c: Counter) -> list[dict[str, Any]]:
            return [
                {"servers": [names[x], names[y]]}
                for (x, y), n in sorted(c.items())
                for _ in range(n)
            ]

        return {"added": entries(b - a), "removed": entries(a - b)}

    # ------------------------------------------------------------------ evaluator
    def check(self, inst: Instance, part: Panels, decisions: tuple) -> list[str]:
        """Every link between racks with a panel; per panel at most its fibres; per server at
        most its ports."""
        out = []
        used: Counter = Counter()
        ports: Counter = Counter()
        for lk in decisions:
            a, b = inst.servers[lk.server_a], inst.servers[lk.server_b]
            rs = tuple(sorted((a.rack, b.rack)))
            if lk.count < 1 or lk.server_a == lk.server_b:
                out.append(f"patch link {a.name}<->{b.name}: needs two servers and >= 1 fibre")
            elif rs not in part.fibres:
                out.append(f"patch link {a.name}<->{b.name}: no panel joins their racks")
            used[rs] += lk.count
            ports[lk.server_a] += lk.count
            ports[lk.server_b] += lk.count
        for rs, n in sorted(used.items()):
            if rs in part.fibres and n > part.fibres[rs]:
                names = [inst.racks[r].name for r in rs]
                out.append(f"patch panel {names}: {n} fibres patched, {part.fibres[rs]} exist")
        for x, n in sorted(ports.items()):
            if n > part.ports_per_server:
                out.append(
                    f"server {inst.servers[x].name}: {n} patch ports used, "
                    f"{part.ports_per_server} exist"
                )
        return out

    def link(self, inst: Instance, part: Panels, decisions: tuple, sa: int, sb: int) -> PairLink:
        key = (min(sa, sb), max(sa, sb))
        k = sum(lk.count for lk in decisions if (lk.server_a, lk.server_b) == key)
        if k < 1:
            return NO_LINK
        rs = tuple(sorted((inst.servers[sa].rack, inst.servers[sb].rack)))
        prop = part.propagation_us(inst, rs) if rs in part.fibres else 0.0
        rate = inverse_rate_us_per_byte(k * _rate_gbps(inst, part))
        return PairLink(self.key, 0, fixed_latency_us(inst), prop, rate, channels=k)

    def relabel(self, decisions: tuple, servers) -> tuple:
        return tuple(
            sorted(
                PatchLink(*sorted((servers[lk.server_a], servers[lk.server_b])), lk.count)
                for lk in decisions
                if lk.server_a in servers and lk.server_b in servers
            )
        )

    # ------------------------------------------------------------------ results file
    def to_json(self, inst: Instance, decisions: tuple) -> list[dict[str, Any]]:
        names = [sv.name for sv in inst.servers]
        return [
            {"servers": [names[lk.server_a], names[lk.server_b]], "fibres": lk.count}
            for lk in decisions
        ]

    def from_json(self, inst: Instance, data: Any, problem: Callable[[str, str], None]) -> tuple:
        index = {sv.name: i for i, sv in enumerate(inst.servers)}
        out = []
        for i, item in enumerate(data if isinstance(data, list) else []):
            ok = isinstance(item, dict) and set(item) == {"servers", "fibres"}
            servers = item.get("servers") if ok else None
            fibres = item.get("fibres") if ok else None
            if not (
                isinstance(servers, list)
                and len(servers) == 2
                and all(s in index for s in servers)
                and isinstance(fibres, int)
                and not isinstance(fibres, bool)
            ):
                problem(f"[{i}]", "expected {servers: [two server names], fibres: integer}")
                continue
            a, b = sorted(index[s] for s in servers)
            out.append(PatchLink(a, b, fibres))
        if not isinstance(data, list):
            problem("", "expected a list of patch links")
        return tuple(sorted(out))


TRANSPORT = PatchPanelTransport()
