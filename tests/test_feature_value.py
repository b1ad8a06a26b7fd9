"""README's "what each feature buys" table (Features that compose) is the output of
``python -m bench.feature_value``, compared without tolerance: every variant of
instances/all-features.yaml re-solved to proven optimality, and the congestion-off plan timed by
the evaluator with the shared links."""

from __future__ import annotations

from pathlib import Path

from bench import feature_value

ROOT = Path(__file__).resolve().parent.parent


def test_readme_table_is_the_scripts_output():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    _head, rest = text.split(feature_value.BEGIN, 1)
    inside, _tail = rest.split(feature_value.END, 1)
    table = feature_value.table()
    assert feature_value.BEGIN + inside + feature_value.END == table
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(feature_value.VARIANTS) + 1
    assert all("| optimal |" in r for r in rows[1:]), rows


def test_each_variant_removes_its_feature():
    """Each edit turns its feature off in the loaded instance (the rows compare what they say)."""
    from optnet import capabilities
    from optnet.capabilities import Feature

    base = feature_value.variant(None)
    assert {
        Feature.WAVELENGTH_SWITCHED,
        Feature.HYBRID,
        Feature.CONGESTION,
        Feature.PHASES,
        Feature.PARAMETER_SERVERS,
    } <= capabilities.features(base)
    gone = {
        "no wavelength-switched fabric": Feature.WAVELENGTH_SWITCHED,
        "no hybrid striping": Feature.HYBRID,
        "one phase": Feature.PHASES,
        "no parameter server": Feature.PARAMETER_SERVERS,
    }
    for name, _what, edit in feature_value.VARIANTS:
        if name in gone:
            inst = feature_value.variant(edit)
            assert gone[name] not in capabilities.features(inst), name
            assert capabilities.features(base) - capabilities.features(inst) == {gone[name]}
    _n, _w, edit = feature_value.CONGESTION
    assert not capabilities.features(feature_value.variant(edit)) & {Feature.CONGESTION}
    (lp,) = [e for n, _w, e in feature_value.VARIANTS if n == "no OCS lightpaths"]
    assert not any(o.racks for o in feature_value.variant(lp).ocses)
