"""Fixtures of the uscope end-to-end tests.

    USCOPE=/path/to/uscope python3 -m pytest -q tests/e2e     (default ./uscope)

Needs root and uprobe events in tracefs (/sys/kernel/tracing/uprobe_events);
without them every test is skipped. The target programs are built once with
`make -C tests/targets`. After every test, nothing named uscope may remain in
/sys/kernel/tracing/uprobe_events or /sys/kernel/tracing/instances."""

import os
import subprocess

import pytest

import uscope_e2e as u


def _skip_reason():
    if os.geteuid() != 0:
        return "uscope e2e tests need root (uprobes are created through tracefs)"
    if not u.UPROBE_EVENTS.exists():
        return (f"{u.UPROBE_EVENTS} is missing: tracefs is not mounted at {u.TRACEFS} "
                "or the kernel has no CONFIG_UPROBE_EVENTS")
    return None


def pytest_collection_modifyitems(config, items):
    reason = _skip_reason()
    if reason:
        mark = pytest.mark.skip(reason=reason)
        for item in items:
            item.add_marker(mark)


def pytest_report_header(config):
    return [f"uscope: {u.uscope_path()}", f"targets: {u.BIN}"]


@pytest.fixture(scope="session", autouse=True)
def targets_built():
    """Build the target programs once."""
    r = subprocess.run(["make", "-C", str(u.TARGETS)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"make -C {u.TARGETS} failed:\n{r.stdout}\n{r.stderr}", pytrace=False)
    return u.BIN


@pytest.fixture(scope="session", autouse=True)
def uscope_bin(targets_built):
    p = u.uscope_path()
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.fail(f"uscope binary not found at {p}: run `make` at the repo root "
                    "or set USCOPE=/path/to/uscope", pytrace=False)
    return p


@pytest.fixture(autouse=True)
def nothing_left_behind(uscope_bin):
    """After each test: end the processes it started (uscope first, with
    SIGTERM), then require that no uprobe event or tracefs instance named
    uscope remains."""
    before = u.leftovers()
    if before != ([], []):
        u.force_cleanup()
        pytest.fail(f"uscope leftovers before the test (from an earlier run?): {before}",
                    pytrace=False)
    yield u.REGISTRY
    u.REGISTRY.cleanup()
    events, insts = u.leftovers()
    if events or insts:
        u.force_cleanup()
        pytest.fail("uscope left things behind in tracefs:\n"
                    f"  uprobe_events: {events}\n  instances: {insts}", pytrace=False)


@pytest.fixture
def bin_dir(targets_built):
    return targets_built
