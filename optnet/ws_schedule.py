"""The slot-by-slot schedule of a wavelength-switched fabric from per-pair channel counts
(docs/model.md §5.7).

Each pair {a, b} with k channels per cycle gives k edges a->b and k edges b->a of a bipartite
multigraph (senders on one side, receivers on the other). When every server sends on at most
K = S T of them and receives on at most K, König's edge-colouring theorem splits the edges into
K matchings; colour c is slot ``c mod S`` on transceiver ``c div S`` (the first S colours fill
distinct slots, so a pair with few channels is spread over the cycle). The colouring is the
classic alternating-path algorithm: give edge (u, v) a colour alpha free at u; if alpha is taken
at v, swap alpha and beta (a colour free at v) along the alpha/beta path from v, which cannot
reach u because the graph is bipartite. ``evaluate.check_ws`` re-checks the result independently.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from optnet import physics
from optnet.decisions import WsSlot

if TYPE_CHECKING:
    from optnet.instance import Instance


def build_schedule(inst: Instance, counts: dict[tuple[int, int], int]) -> list[WsSlot]:
    """The schedule giving each server pair ``counts[(a, b)]`` channels each way; ValueError when
    a server would need more than K = slots_per_cycle x transceivers_per_server."""
    f = inst.wavelength_switched
    if not any(counts.values()):
        return []
    if f is None or f.disabled:
        raise ValueError("no enabled wavelength-switched fabric to schedule on")
    K, S = f.channels, f.slots_per_cycle
    degree: dict[int, int] = defaultdict(int)
    for (a, b), k in counts.items():
        degree[a] += k
        degree[b] += k
    over = {s: n for s, n in degree.items() if n > K}
    if over:
        names = ", ".join(f"{inst.servers[s].name}: {n}" for s, n in sorted(over.items()))
        raise ValueError(f"more than K = {K} channels per cycle at {names}")
    send: dict[int, dict[int, int]] = defaultdict(dict)  # sender -> colour -> receiver
    recv: dict[int, dict[int, int]] = defaultdict(dict)  # receiver -> colour -> sender
    for (a, b), k in sorted(counts.items()):
        for u, v in [(a, b)] * k + [(b, a)] * k:
            alpha = next(c for c in range(K) if c not in send[u])
            if alpha in recv[v]:
                beta = next(c for c in range(K) if c not in recv[v])
                path = []  # (sender, receiver, colour) along the alpha/beta path from v
                node, at_receiver, col = v, True, alpha
                while True:
                    side = recv if at_receiver else send
                    if col not in side[node]:
                        break
                    other = side[node][col]
                    path.append((other, node, col) if at_receiver else (node, other, col))
                    node, at_receiver = other, not at_receiver
                    col = beta if col == alpha else alpha
                for s, r, c in path:
                    del send[s][c], recv[r][c]
                for s, r, c in path:
                    c2 = beta if c == alpha else alpha
                    send[s][c2], recv[r][c2] = r, s
            send[u][alpha], recv[v][alpha] = v, u
    return sorted(
        WsSlot(c % S, c // S, s, r, physics.awgr_wavelength(inst, s, r))
        for s, cols in send.items()
        for c, r in cols.items()
    )
