"""What a transport plug-in provides (docs/model.md §5.9), and the pair link it offers.

A *transport* carries a server pair's bytes beside the OCS lightpaths, the wavelength-switched
fabric and the packet fabric. It is one module that gives every stage its part, through the
small protocol :class:`Transport`, and one line of the registry (``optnet/transports/__init__``):

- **input**: a field of ``topology`` (:attr:`Transport.key`, typed by :attr:`Transport.schema`)
  and the instance part built from it (:meth:`Transport.part`), kept in ``Instance.transports``;
- **MILP**: its variables and rows (:meth:`Transport.add_variables`), whether a slot pair uses
  it in a phase (:meth:`Transport.used`, 0/1) and its *offer* to the pair
  (:meth:`Transport.offer`): lower bounds on the pair's latency alpha and inverse bandwidth beta
  that hold when used and are slack otherwise.
  ``model/offers.py`` sums the offers into the pair rows, as PyPSA's nodal balance sums each
  component's contribution per bus: one transport per pair, the packet fabric takes the rest;
- **decisions**: its part of a plan (a tuple of orderable records) decoded from the MILP
  (:meth:`Transport.decode`; :meth:`Transport.encode` for a warm start), written to and read
  from a results file's ``transports.KEY`` (:meth:`Transport.to_json`,
  :meth:`Transport.from_json`), kept in ``Decisions.transports``;
- **changes** (``--from``): what failures took of a running plan's part, its changes as the MILP
  counts them and as ``changes.diff`` lists them (:meth:`Transport.lost`,
  :meth:`Transport.change_count`, :meth:`Transport.diff`);
- **energy**: the watts its lit units draw while a job runs (:meth:`Transport.lit_terms` in the
  MILP, :meth:`Transport.lit_watts` in the evaluator);
- **bounds and decomposition** (``auto``): what a server shares among its pairs
  (:meth:`Transport.slot_capacity`), the racks it joins (:meth:`Transport.racks_reached`), its
  part of a block (:meth:`Transport.restrict`) and of the one-rack relaxation
  (:meth:`Transport.relaxed`), its records renumbered (:meth:`Transport.relabel`);
- **evaluator**: the plan's feasibility (:meth:`Transport.check`) and the link a server pair has
  over it (:meth:`Transport.link`, a :class:`PairLink`);
- **capabilities**: the consumers that refuse it and the features it cannot be combined with,
  each with its reason (``optnet.capabilities`` reads them into its one table).

Nothing here imports Pyomo: the evaluator imports the registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pydantic import BaseModel

    from optnet.instance import Instance, Rack


@dataclass(frozen=True)
class PairLink:
    """The connection a slot pair actually has.

    ``fixed_us``, ``propagation_us`` and ``inverse_rate`` describe the pair as one link (alpha and
    beta of docs/model.md §2; for a striped ``hybrid`` pair the larger of the two latencies and
    1 / (q rate + packet rate)). With a congestion model the two parts are costed apart: the
    lightpath part (``lp_*``, per byte of the whole transfer) and the packet part (``pkt_*``,
    carrying ``packet_share`` of the bytes through NICs and uplinks shared with other flows).
    """

    kind: str
    """"lightpath", "wavelength_switched", "packet", "hybrid", "none", or a plug-in's key."""
    lightpaths: int
    fixed_us: float
    propagation_us: float
    inverse_rate: float  # us per byte
    switching_us: float = 0.0
    """Wavelength-switched fabric: guard + worst-case wait for the pair's next slot."""
    channels: int = 0
    """Wavelength-switched fabric: slot-channels per cycle each way; a plug-in: its links."""
    packet_share: float = 0.0
    lp_fixed_us: float = 0.0
    lp_propagation_us: float = 0.0
    lp_inverse_rate: float = 0.0
    pkt_fixed_us: float = 0.0
    pkt_propagation_us: float = 0.0
    pkt_nic_inverse_rate: float = 0.0
    """us per packet byte through the NIC (a packet or striped pair's)."""
    pkt_leaf_inverse_rate: float = 0.0
    """us per packet byte through the server's share of the leaf uplinks (between racks
    without a congestion model, else 0)."""

    @property
    def alpha_us(self) -> float:
        return self.fixed_us + self.propagation_us + self.switching_us

    @property
    def own_path(self) -> bool:
        """The pair's bytes run on links of its own, shared with no other flow (the
        wavelength-switched fabric's slot-channels, a plug-in's links): timed alone."""
        return self.kind not in ("lightpath", "hybrid", "packet", "none")


@dataclass(frozen=True)
class Offer:
    """Lower bounds a transport puts on slot pair p's latency and inverse bandwidth in phase h
    (MILP expressions, docs/model.md §5.9): ``alpha`` <= alpha[h,p] and ``beta`` <= beta[h,p]
    (us, us per MB) when p uses it, and both at most 0 when not."""

    alpha: Any
    beta: Any


class Transport(Protocol):
    """A transport plug-in (see the module docstring); ``optnet/transports/patch_panel.py`` is
    the worked example."""

    key: str
    """Its ``topology`` field, its key in ``Instance.transports``, ``Decisions.transports`` and
    a results file's ``transports``, and the ``kind`` of its :class:`PairLink`."""
    feature: str
    """Its name in the capability table (docs/model.md §10)."""
    schema: type[BaseModel]
    """The type of its ``topology`` field."""
    doc: str
    """The field's user documentation."""
    refused: Mapping[str, str]
    """Consumer (``capabilities.Consumer`` value) -> why that consumer refuses this transport."""
    refused_with: Mapping[str, str]
    """Feature (``capabilities.Feature`` value) -> why the loader refuses both in one instance."""
    delegated: str | None
    """Why ``auto`` hands instances with it to the joint model (None: it decomposes them, with
    :meth:`restrict`, :meth:`relaxed` and :meth:`relabel`)."""

    def part(self, spec: Any, racks: list[Rack], problem: Callable[[str, str], None]) -> Any:
        """The instance part from the validated field (``problem(field, message)`` reports a
        cross-reference error)."""

    def racks_reached(self, inst: Instance, part: Any) -> set[int]:
        """Racks whose servers it can join to another server in some plan (the closed-form
        infeasibility proofs must not call them cut off: ``infeasibility.cut_off_servers``)."""

    def restrict(self, part: Any, racks: Mapping[int, int]) -> Any:
        """Its part on the mapped racks, renumbered (old -> new), None when nothing is left: the
        decomposition's block (``scale.sub_instance``)."""

    def relaxed(self, part: Any) -> Any:
        """Its part for the one rack of ``bounds.relaxed_cluster``: everything the real part
        allows, no slower (so the relaxation's bounds stay valid)."""

    def model_data(self, md: Any) -> Any:
        """Coefficient tables for its rows (plain Python), and ``alphas``/``betas``: every
        latency and inverse bandwidth it can offer, for the big-M and bound constants."""

    def add_variables(self, m: Any, md: Any, data: Any) -> None:
        """Its variables and its own rows (capacity, attachment, ...)."""

    def used(self, m: Any, md: Any, data: Any, h: int, p: tuple[int, int, int]) -> Any:
        """1 when slot pair p = (job, slot a, slot b) uses it in phase h, else 0 (an expression
        of its binaries)."""

    def offer(self, m: Any, md: Any, data: Any, h: int, p: tuple[int, int, int]) -> Offer:
        """Its bounds on pair p's alpha and beta in phase h."""

    def slot_capacity(self, inst: Instance, part: Any) -> tuple[int, Mapping[int, float]]:
        """(C, beta_k): a server has at most C of its units (links, channels) for all its
        pairs, and a pair with k of them has inverse bandwidth at least beta_k (us per byte),
        k = 1..C: the lower bounds split a slot's pairs between the transports with it
        (``model.collectives._split_beta``, ``bounds.ideal_bound``)."""

    def decode(self, m: Any, md: Any, data: Any, placement: dict[int, tuple[int, ...]]) -> tuple:
        """Its part of the plan from the variable values (servers as indices)."""

    def encode(self, m: Any, md: Any, data: Any, placement, decisions: tuple) -> list[tuple]:
        """(variable, value) of its integer variables that reproduce its part of a plan (the
        inverse of :meth:`decode`, for a warm start)."""

    def lit_terms(self, m: Any, md: Any, data: Any) -> list[tuple[int, Any, float]]:
        """(job, binary variable, watts): the job's units draw the watts while the variable is
        1 (the energy objective, ``model/energy.py``; the evaluator's :meth:`lit_watts`)."""

    def lit_watts(self, inst: Instance, part: Any, decisions: tuple, servers: set[int]) -> float:
        """Watts its units between two of ``servers`` (one job's) draw (``optnet.energy``)."""

    def lost(self, inst: Instance, part: Any, decisions: tuple) -> tuple:
        """Its records of a running plan that the instance's failures took (lost, not changed:
        ``changes.surviving``)."""

    def change_count(self, m: Any, md: Any, data: Any, previous: tuple, placement) -> Any:
        """Its records added or removed against the running plan's surviving ``previous``
        (placed by ``placement``), as the MILP counts them (``model/changes.py``, ``--from``)."""

    def diff(self, inst: Instance, old: tuple, new: tuple) -> dict[str, list]:
        """``{"added": [...], "removed": [...]}``: one entry per change :meth:`change_count`
        counts (``changes.diff``)."""

    def check(self, inst: Instance, part: Any, decisions: tuple) -> list[str]:
        """Violations of the plan's part ``decisions`` (empty: feasible)."""

    def link(self, inst: Instance, part: Any, decisions: tuple, sa: int, sb: int) -> PairLink:
        """The link servers sa, sb have over it (kind "none": no link)."""

    def relabel(self, decisions: tuple, servers: Mapping[int, int]) -> tuple:
        """Its records with servers renumbered (old -> new), those with an unmapped server
        dropped (``Decisions.relabelled``: the decomposition's blocks)."""

    def to_json(self, inst: Instance, decisions: tuple) -> Any:
        """Its part of a results file (names, not indices)."""

    def from_json(self, inst: Instance, data: Any, problem: Callable[[str, str], None]) -> tuple:
        """Its part of a plan from a results file's ``transports.KEY``."""


NO_LINK = PairLink("none", 0, 0.0, 0.0, 0.0)
