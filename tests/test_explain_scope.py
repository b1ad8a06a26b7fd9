"""``explain`` answers only for the families it reads: every feature of an instance is either
read or refused (exit 2, naming it), never silently misattributed (issue 22)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from optnet import errors, schema
from optnet.explain import (
    OBJECTIVE_ONLY_FIELDS,
    READ_FIELDS,
    SCOPED_FIELDS,
    check_scope,
)
from optnet.instance import Instance, load_instance
from optnet.transports.patch_panel import Panels

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "instances" / "tiny.yaml"
SIRIUS = ROOT / "instances" / "sirius.yaml"


def test_every_instance_field_is_classified():
    """A new Instance field must be declared read, objective-only or scoped (checked)."""
    fields = {f.name for f in dataclasses.fields(Instance)}
    classified = READ_FIELDS | OBJECTIVE_ONLY_FIELDS | SCOPED_FIELDS
    assert fields - classified == set(), "classify these fields in optnet/explain.py"
    assert classified - fields == set()
    assert not READ_FIELDS & SCOPED_FIELDS


def _activate(inst: Instance, name: str) -> Instance:
    sirius = load_instance(SIRIUS)
    s0 = inst.servers[0]
    values = {
        "wavelength_switched": sirius.wavelength_switched,
        "relay_overhead_us": 1.0,
        "tenants": (schema.Tenant(name="t", min_lightpaths=1),),
        "direct": object(),
        "phases": ("a", "b"),
        "real_rack_sizes": (2, 2),
        "servers": (dataclasses.replace(s0, dead_transceivers=(0,)), *inst.servers[1:]),
        "packet": schema.PacketFabric(
            rate_gbps=100.0, congestion_control="dcqcn", job_sharing="time-average"
        ),
        "transports": {
            "patch_panels": Panels({(0, 1): 1}, {(0, 1): 0.0}, {(0, 1): "smf"}, 1, None)
        },
    }
    return dataclasses.replace(inst, **{name: values[name]})


@pytest.mark.parametrize("name", sorted(SCOPED_FIELDS))
def test_each_unread_feature_is_refused(name):
    inst = load_instance(TINY)
    check_scope(inst)  # the plain instance is explained
    with pytest.raises(errors.InputError) as exc:
        check_scope(_activate(inst, name), "x.json")
    assert len(exc.value.problems) == 1
    assert "explain does not support" in str(exc.value)


def test_a_future_field_in_use_is_refused():
    """A field explain was never taught about is refused as soon as it holds a value."""

    @dataclasses.dataclass(frozen=True)
    class Future(Instance):
        teleporter: int = 0

    inst = load_instance(TINY)
    base = {f.name: getattr(inst, f.name) for f in dataclasses.fields(Instance)}
    check_scope(Future(**base))
    with pytest.raises(errors.InputError, match="teleporter"):
        check_scope(Future(**base, teleporter=3))
