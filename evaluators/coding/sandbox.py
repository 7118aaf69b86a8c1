"""Running untrusted code: bubblewrap, an unprivileged user, rlimits and a wall-clock deadline.

The command runs
  * as user ``nobody`` (privileges dropped before bubblewrap starts, so RLIMIT_NPROC binds),
  * in new user, pid, net, ipc and uts namespaces (no network: only a private loopback),
  * with /usr read-only, a private /tmp and /proc, and the working copy as the only writable path,
  * under RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC and RLIMIT_FSIZE,
  * and is killed with its whole process group (bubblewrap's pid namespace takes every descendant
    with it) when the wall-clock deadline passes.
Debian's ``/usr/bin/python3`` runs inside (pyenv's interpreter lives under /root, which is not
mounted).
"""
import contextlib
import dataclasses
import os
import pathlib
import pwd
import shutil
import signal
import subprocess
import time

SANDBOX_USER = "nobody"


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0
    cpu_s: int = 60
    memory_bytes: int = 1 << 30
    processes: int = 64
    file_bytes: int = 64 << 20


@dataclasses.dataclass(frozen=True)
class Result:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_time: float


def _bwrap() -> str:
    path = shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable("bubblewrap is not installed: apt-get install bubblewrap")
    return path


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    if not path:
        raise SandboxUnavailable(f"{name} is missing: apt-get install util-linux")
    return path


def _user():
    try:
        return pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        raise SandboxUnavailable(f"no user {SANDBOX_USER!r} to run untrusted code as") from None


def bwrap_argv(workdir: str, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    args = [_bwrap(), "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev",
            "--tmpfs", "/tmp", "--bind", workdir, "/work", "--chdir", "/work",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "LANG", "C.UTF-8"]
    for key, value in (env or {}).items():
        args += ["--setenv", key, value]
    return args + ["--"] + argv


def _kill_namespace(proc: subprocess.Popen) -> None:
    """Kills the sandbox's pid-namespace init (the kernel then kills everything in the namespace)
    and lets bubblewrap reap it, so no zombie or orphan outlives the call; then the group."""
    try:
        children = pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
        children = []
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(child), signal.SIGKILL)
    try:
        proc.wait(2)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run(workdir: str, argv: list[str], limits: Limits = Limits(),
        env: dict[str, str] | None = None) -> Result:
    """Runs ``argv`` inside the sandbox with ``workdir`` mounted at /work (writable)."""
    user = _user()
    # prlimit sets the limits and setpriv drops to the sandbox user before bubblewrap starts; both
    # are util-linux programs, so no Python code runs between fork and exec (this process may be
    # multithreaded, e.g. by JAX).
    prefix = [_tool("prlimit"), f"--cpu={limits.cpu_s}", f"--as={limits.memory_bytes}",
              f"--fsize={limits.file_bytes}", f"--nproc={limits.processes}", "--core=0", "--"]
    if os.geteuid() == 0:
        os.chown(workdir, user.pw_uid, user.pw_gid)
        prefix += [_tool("setpriv"), f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                   "--clear-groups", "--"]
    start = time.perf_counter()
    proc = subprocess.Popen(prefix + bwrap_argv(workdir, argv, env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limits.wall_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_namespace(proc)
        out, err = proc.communicate()
        timed_out = True
    if not timed_out and proc.returncode and b"Operation not permitted" in err[:500] and \
            b"bwrap" in err[:500]:
        raise SandboxUnavailable(f"bubblewrap could not create its namespaces: "
                                 f"{err[:300].decode(errors='replace')}")
    return Result(None if timed_out else proc.returncode, out.decode(errors="replace"),
                  err.decode(errors="replace"), timed_out, time.perf_counter() - start)
