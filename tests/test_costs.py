"""The run's cost summary (tests/costs.py) sums each test under the unit xdist schedules."""

from __future__ import annotations

from types import SimpleNamespace

from tests.costs import Costs, unit_of


def test_a_grouped_test_counts_under_its_group_and_others_under_their_file() -> None:
    assert unit_of("tests/test_a.py::test_x[p-1]@migration_rerun") == "@migration_rerun"
    assert unit_of("tests/api/test_b.py::TestC::test_y") == "tests/api/test_b.py"
    # An "@" in a parameter is not a group (xdist appends the group after the whole id).
    assert unit_of("tests/test_c.py::test_z[a@b]") == "tests/test_c.py"


def test_each_phase_of_each_test_is_summed_once_per_unit(tmp_path) -> None:
    costs = Costs(tmp_path / "costs.json")
    worker = SimpleNamespace(gateway=SimpleNamespace(id="gw1"))
    for nodeid, when, seconds in [
        ("tests/t.py::a@g", "setup", 10.0),
        ("tests/t.py::a@g", "call", 2.0),
        ("tests/u.py::b@g", "call", 3.0),
        ("tests/u.py::b@g", "teardown", 1.0),
        ("tests/v.py::c", "call", 5.0),
    ]:
        report = SimpleNamespace(nodeid=nodeid, when=when, duration=seconds, node=worker)
        costs.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    units = costs.units()
    assert set(units) == {"@g", "tests/v.py"}
    group = units["@g"]
    assert (len(group.tests), group.workers) == (2, {"gw1"})
    assert dict(group.seconds) == {"setup": 10.0, "call": 5.0, "teardown": 1.0}
    assert units["tests/v.py"].total == 5.0
