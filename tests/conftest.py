from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def tiny():
    from optnet.instance import load_instance

    return load_instance(INSTANCES / "tiny.yaml")
