"""Shared fixtures for the inferscope_py tests.

Environment (set by tests/python/CMakeLists.txt): PYTHONPATH with the built package, ISCOPE_ANALYZE (the
iscope-analyze binary), ISCOPE_LIBRARY (libinferscope.so), ISCOPE_BUILD_DIR.
"""

import os

import pytest

import inferscope_py as isc


@pytest.fixture
def record(tmp_path):
    """record(fn, trace=False, **filters) -> the dump of a session around fn(), read back as dicts."""

    def run(fn, trace=False, config=None, **filters):
        path = tmp_path / "test.iscope"
        cfg = dict(output=str(path), python=False)
        cfg.update(config or {})
        assert isc.start(**cfg), "a session was already recording"
        try:
            if trace:
                isc.trace_python(True, **filters)
            fn()
        finally:
            isc.trace_python(False)
            isc.stop()
        return isc._native._read_dump(str(path))

    return run


def of_kind(dump, kind, name=None):
    return [r for r in dump["records"] if r["kind"] == kind and (name is None or r["name"] == name)]


def pytest_sessionfinish(session, exitstatus):
    # ctest shows exit code 77 as "skipped": a suite that could not run anything must not pass silently.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus not in (0, 5):  # 5: nothing collected (a module-level skip)
        return
    stats = reporter.stats
    if stats.get("skipped") and not stats.get("passed") and not stats.get("failed"):
        session.exitstatus = 77


def analyze_binary():
    path = os.environ.get("ISCOPE_ANALYZE")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("ISCOPE_ANALYZE is not set to the iscope-analyze binary (run through ctest)")
    return path
