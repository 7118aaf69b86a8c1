"""Running an external checker binary with a time limit; a clear error when it is missing."""
import dataclasses
import os
import shutil
import signal
import subprocess
import time

INSTALL_HINTS = {
    "lake": "install Lean 4 with elan and build the miniF2F project (third_party/README.md: Lean)",
    "lean": "install Lean 4 with elan (third_party/README.md: Lean)",
    "dafny": "install Dafny 4.x (third_party/README.md: Dafny); Debian's dafny 2.3 only works as "
             "the legacy backend (dafny.legacy = True)",
    "verus": "install Verus (third_party/README.md: Verus)",
}


class ToolMissing(RuntimeError):
    """The checker binary is not installed; the message says how to install it."""


@dataclasses.dataclass(frozen=True)
class ToolRun:
    returncode: int | None
    output: str
    timed_out: bool
    wall_time: float


def require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        hint = INSTALL_HINTS.get(os.path.basename(binary), "install it")
        raise ToolMissing(f"{binary!r} not found on PATH: {hint}")
    return path


def run_tool(argv: list[str], cwd: str, timeout_s: float, env: dict | None = None) -> ToolRun:
    require(argv[0])
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, **(env or {})})
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return ToolRun(proc.returncode, out.decode(errors="replace"), False,
                       time.perf_counter() - start)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return ToolRun(None, out.decode(errors="replace"), True, time.perf_counter() - start)
