"""pytest plugin that carries the repository-test verdict to the host
(docs/world_models.md). It lives outside the repository, is mounted read-only at /harness inside the
sandbox and is loaded with ``-p countermem_harness`` before any conftest or tested module.
"""
import hashlib
import hmac
import json
import os

import _pytest.main
import _pytest.python
import _pytest.reports
import _pytest.runner
import pluggy._callers
import pluggy._hooks
import pluggy._manager
import pytest

_write = os.write
_CHECKED = [  # (owner, attribute): what decides a test's reported outcome
    (_pytest.runner, "call_and_report"), (_pytest.runner, "runtestprotocol"),
    (_pytest.runner, "call_runtest_hook"), (_pytest.runner, "pytest_runtest_makereport"),
    (_pytest.runner, "pytest_runtest_protocol"), (_pytest.runner.CallInfo, "from_call"),
    (_pytest.reports.TestReport, "from_item_and_call"), (_pytest.reports.TestReport, "__init__"),
    (_pytest.reports.BaseReport, "passed"), (_pytest.reports.BaseReport, "failed"),
    (_pytest.python, "pytest_pyfunc_call"), (_pytest.python.Function, "runtest"),
    (_pytest.main, "pytest_runtestloop"), (_pytest.main.Session, "perform_collect"),
    (pluggy._callers, "_multicall"), (pluggy._hooks._HookCaller, "__call__"),
    (pluggy._manager.PluginManager, "_hookexec"), (os, "write"), (os, "_exit"),
]


def _attr(owner, name):
    return vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name, None)


def _repository_conftest(path: str) -> bool:
    """A conftest.py of the repository: under /work and on a read-only mount (tested code can
    create files only on writable ones)."""
    try:
        return path.endswith("/conftest.py") and path.startswith("/work/") and \
            bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _read_key(fd: int) -> bytes:
    key = b""
    while len(key) < 32:
        chunk = os.read(fd, 32 - len(key))
        if not chunk:
            break
        key += chunk
    os.close(fd)
    return key


class Harness:
    def __init__(self):
        self._fd = int(os.environ["COUNTERMEM_VERDICT_FD"])
        os.set_inheritable(self._fd, False)
        self._key = _read_key(int(os.environ["COUNTERMEM_KEY_FD"]))
        self._mac = b""
        self._seq = 0
        expected = os.environ.get("COUNTERMEM_EXPECTED")
        self.expected = None
        if expected:
            with open(expected, encoding="utf-8") as f:
                self.expected = set(json.load(f))
        self.original = [_attr(owner, name) for owner, name in _CHECKED]
        self.checked_own = {name: vars(Harness)[name] for name in vars(Harness)
                            if callable(vars(Harness)[name])}
        self.tampered: list[str] = []
        self.collecting = False
        self.phases: dict[str, dict] = {}
        self.calls: dict[str, bool] = {}
        self.send("start", pid=os.getpid())

    def send(self, kind: str, **fields) -> None:
        body = json.dumps({"seq": self._seq, "kind": kind, **fields}, sort_keys=True)
        self._mac = hmac.new(self._key, self._mac + body.encode(), hashlib.sha256).digest()
        data = f"{self._mac.hex()} {body}\n".encode()
        while data:
            data = data[_write(self._fd, data):]
        self._seq += 1

    def check_integrity(self) -> None:
        for (owner, name), before in zip(_CHECKED, self.original):
            if _attr(owner, name) is not before:
                self.note(f"{getattr(owner, '__name__', owner)}.{name} was replaced")
        for name, before in self.checked_own.items():
            if vars(Harness).get(name) is not before:
                self.note(f"the harness's {name} was replaced")

    def note(self, problem: str) -> None:
        if problem not in self.tampered:
            self.tampered.append(problem)

    # pytest hooks ---------------------------------------------------------------------------
    def pytest_plugin_registered(self, plugin, manager):
        if self.collecting and not _repository_conftest(getattr(plugin, "__file__", "") or ""):
            self.note(f"plugin {manager.get_name(plugin) or plugin!r} registered during the run")

    def pytest_collection(self, session):
        self.collecting = True

    def pytest_collectreport(self, report):
        if report.failed:
            self.send("collect_error", nodeid=report.nodeid, error=str(report.longrepr)[-2000:])

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        if self.expected is None:
            return
        keep = [item for item in items if item.nodeid in self.expected]
        dropped = [item for item in items if item.nodeid not in self.expected]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    def pytest_collection_finish(self, session):
        ids = [item.nodeid for item in session.items]
        missing = sorted(self.expected - set(ids)) if self.expected is not None else []
        self.send("collected", ids=ids, missing=missing)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        self.calls[item.nodeid] = outcome.excinfo is None

    def pytest_runtest_logreport(self, report):
        self.phases.setdefault(report.nodeid, {})[report.when] = \
            "skipped" if report.skipped else report.passed

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        yield
        if "runtest" in vars(item):
            self.note(f"{item.nodeid}: runtest was replaced on the item")

    def pytest_runtest_logfinish(self, nodeid, location):
        self.check_integrity()
        phases = self.phases.pop(nodeid, {})
        passed = (phases.get("setup") is True and phases.get("call") is True
                  and phases.get("teardown") is True and self.calls.get(nodeid) is True)
        self.send("test", nodeid=nodeid, passed=passed, phases=phases,
                  skipped="skipped" in phases.values())

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self.check_integrity()
        self.send("finish", exitstatus=int(exitstatus), calls=len(self.calls),
                  tampered=self.tampered)


def pytest_configure(config):
    config.pluginmanager.register(_HARNESS, "countermem_harness_instance")


_HARNESS = Harness()
