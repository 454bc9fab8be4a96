"""Tests that cannot pass by accident: a wait for background work is always checked.

`eventually(...)` returns the condition's last value, falsy on a timeout; a test that
throws it away would go on as if the work had happened. Every call must be asserted,
assigned or returned.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
WAITS = {"eventually"}


def _discarded_waits(source: str) -> list[int]:
    """The lines of wait calls whose value is thrown away (an expression statement)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            called = node.value.func
            name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
            if name in WAITS:
                lines.append(node.lineno)
    return lines


def test_no_test_throws_a_waits_answer_away():
    found = {
        path.name: lines
        for path in sorted(TESTS.glob("*.py"))
        if (lines := _discarded_waits(path.read_text()))
    }
    assert found == {}


def test_the_check_finds_a_discarded_wait():
    source = "def test_x():\n    eventually(lambda: done)\n    assert eventually(lambda: 1)\n"
    assert _discarded_waits(source) == [2]
