"""The fault script, end to end, on servers of its own (slow: `make test-slow`, which CI runs)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_fault_scenarios_all_hold():
    result = subprocess.run(
        [sys.executable, "benchmarks/faults.py", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "FAILED" not in result.stdout
