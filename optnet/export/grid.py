"""The wavelength grid optnet's wavelength numbers map onto (shared by the gnpy and wdm formats).

optnet wavelength ``w`` is channel ``w`` of a fixed grid anchored at GNPy's default spectrum.
"""

from __future__ import annotations

#: GNPy default spectrum (eqpt_config.json "SI"): f_min 191.3 THz, 50 GHz spacing; GNPy puts
#: the first carrier at f_min + spacing. optnet wavelength w is channel w of that grid (or of a
#: wider spacing, ``spacing_ghz``, for rates whose transceiver mode needs it).
GRID_SPACING_HZ = 50e9
GRID_F_MIN_HZ = 191.3e12
#: IETF flexi-grid (RFC 7698): centre = 193.1 THz + N * 6.25 GHz, width = M * 12.5 GHz.
FLEXI_ANCHOR_HZ = 193.1e12
FLEXI_N_STEP_HZ = 6.25e9
FLEXI_M_STEP_HZ = 12.5e9


def freq_slot(w: int, spacing_hz: float = GRID_SPACING_HZ) -> dict[str, int]:
    """IETF flexi-grid slot {N, M} of optnet wavelength ``w`` on a ``spacing_hz`` grid whose
    channel 0 is GNPy's first carrier, f_min + spacing (f_min = 191.3 THz)."""
    centre = GRID_F_MIN_HZ + (w + 1) * spacing_hz
    return {
        "N": round((centre - FLEXI_ANCHOR_HZ) / FLEXI_N_STEP_HZ),
        "M": round(spacing_hz / FLEXI_M_STEP_HZ),
    }
