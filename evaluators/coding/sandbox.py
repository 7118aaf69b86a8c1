"""Running untrusted code: bubblewrap, one unprivileged uid per concurrent slot, rlimits, size-
limited tmpfs, capped output and a wall-clock deadline (threat model: docs/world_models.md).
"""
import contextlib
import dataclasses
import fcntl
import os
import pathlib
import secrets
import selectors
import shutil
import signal
import subprocess
import time

SLOT_UID_BASE = 2_100_000_000      # slot i runs as uid/gid SLOT_UID_BASE + i (no passwd entry)
SLOTS = int(os.environ.get("COUNTERMEM_SANDBOX_SLOTS", "16"))
SLOT_DIR = pathlib.Path(os.environ.get("COUNTERMEM_SANDBOX_SLOT_DIR", "/tmp/countermem-sandbox-slots"))
HOST_ENV = {"PATH": "/usr/bin:/bin"}   # all that bubblewrap (and its init) sees of the host


class SandboxUnavailable(RuntimeError):
    """The sandbox could not start (bubblewrap missing, no namespaces, no free slot); the message
    says why. Checkers report it as ``completed=False``, never as a failed action."""


@dataclasses.dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0
    cpu_s: int = 60
    memory_bytes: int = 1 << 30
    processes: int = 64
    file_bytes: int = 64 << 20
    tmp_bytes: int = 256 << 20       # /tmp and /dev/shm (tmpfs)
    work_bytes: int = 64 << 20       # new files at /work's top level (tmpfs)
    keep_bytes: int = 64 << 10       # of stdout and of stderr, kept for feedback
    read_bytes: int = 16 << 20       # stdout + stderr read before the sandbox is killed
    channel_bytes: int = 8 << 20     # verdict channel


@dataclasses.dataclass(frozen=True)
class Result:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_time: float
    output_overflow: bool = False
    channel: bytes = b""
    channel_overflow: bool = False
    key: bytes = b""
    uid: int | None = None


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


def bwrap_argv(workdir: str, argv: list[str], env: dict[str, str] | None = None,
               limits: Limits = Limits(), ro_mounts: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """bubblewrap's command line: the repository's top-level entries read-only under /work."""
    args = [_bwrap(), "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            "--size", str(limits.work_bytes), "--tmpfs", "/work"]
    for entry in sorted(os.listdir(workdir)):
        args += ["--ro-bind", os.path.join(workdir, entry), f"/work/{entry}"]
    for source, dest in ro_mounts:
        args += ["--ro-bind", source, dest]
    args += ["--remount-ro", "/", "--chdir", "/work",
             "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
             "--setenv", "TMPDIR", "/tmp", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
             "--setenv", "LANG", "C.UTF-8"]
    for key, value in (env or {}).items():
        args += ["--setenv", key, value]
    return args + ["--"] + argv


def processes_of(uids) -> list[int]:
    """Live (non-zombie) processes owned by any of ``uids``."""
    uids, found = set(uids), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid in uids and \
                        pathlib.Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
    return found


@contextlib.contextmanager
def slot(deadline: float):
    """Holds one sandbox slot (its own uid) until the block ends; waits for a free one until
    ``deadline``, then raises SandboxUnavailable."""
    SLOT_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    while True:
        for index in range(SLOTS):
            uid = SLOT_UID_BASE + index
            fd = os.open(SLOT_DIR / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                         0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            if processes_of([uid]):  # a straggler of an earlier run: leave this slot alone
                os.close(fd)
                continue
            try:
                yield uid
            finally:
                os.close(fd)
            return
        if time.monotonic() > deadline:
            raise SandboxUnavailable(f"all {SLOTS} sandbox slots are busy "
                                     "(COUNTERMEM_SANDBOX_SLOTS sets how many)")
        time.sleep(0.05)


def sandbox_uids() -> list[int]:
    """Every uid a sandboxed command may run as (for tests that look for leftover processes)."""
    return [SLOT_UID_BASE + i for i in range(SLOTS)] if os.geteuid() == 0 else [os.getuid()]


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


class _CappedReader:
    """Reads the sandbox's pipes without blocking: keeps the first ``keep`` bytes of each stream
    and counts what was read, so a flood costs the host bounded memory."""

    def __init__(self, streams: dict[str, int], keep: dict[str, int]):
        self.selector = selectors.DefaultSelector()
        for name, fd in streams.items():
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, name)
        self.kept = {name: bytearray() for name in streams}
        self.read = {name: 0 for name in streams}
        self.keep = keep

    def pump(self, timeout: float) -> bool:
        """Reads what is ready within ``timeout``; False once every stream has ended."""
        if not self.selector.get_map():
            return False
        for key, _ in self.selector.select(max(timeout, 0.0)):
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self.selector.unregister(key.fd)
                continue
            name = key.data
            self.read[name] += len(chunk)
            room = self.keep[name] - len(self.kept[name])
            if room > 0:
                self.kept[name] += chunk[:room]
        return bool(self.selector.get_map())

    def close(self):
        self.selector.close()


def run(workdir: str, argv: list[str], limits: Limits = Limits(),
        env: dict[str, str] | None = None, ro_mounts: tuple[tuple[str, str], ...] = (),
        channel: bool = False) -> Result:
    """Runs ``argv`` inside the sandbox with ``workdir``'s entries read-only under /work.
    Raises SandboxUnavailable when the sandbox cannot start."""
    start = time.monotonic()
    deadline = start + limits.wall_s
    with slot(deadline) if os.geteuid() == 0 else contextlib.nullcontext(None) as uid:
        return _run_as(uid, workdir, argv, limits, dict(env or {}), ro_mounts, channel, start)


def _run_as(uid, workdir, argv, limits, env, ro_mounts, channel, start) -> Result:
    # prlimit sets the limits and setpriv drops to the slot's uid before bubblewrap starts; both
    # are util-linux programs, so no Python code runs between fork and exec (this process may be
    # multithreaded, e.g. by JAX).
    prefix = [_tool("prlimit"), f"--cpu={limits.cpu_s}", f"--as={limits.memory_bytes}",
              f"--fsize={limits.file_bytes}", f"--nproc={limits.processes}", "--core=0", "--"]
    if uid is not None:
        os.chmod(workdir, 0o755)
        prefix += [_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    pass_fds, host_ends, key = (), {}, b""
    if channel:
        verdict_r, verdict_w = os.pipe()
        key_r, key_w = os.pipe()
        key = secrets.token_bytes(32)
        os.write(key_w, key)
        os.close(key_w)
        env.update(COUNTERMEM_VERDICT_FD=str(verdict_w), COUNTERMEM_KEY_FD=str(key_r))
        pass_fds, host_ends = (verdict_w, key_r), {"channel": verdict_r}
    try:
        proc = subprocess.Popen(prefix + bwrap_argv(workdir, argv, env, limits, ro_mounts),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                pass_fds=pass_fds, env=HOST_ENV)
    except BaseException:
        for fd in host_ends.values():
            os.close(fd)
        raise
    finally:
        for fd in pass_fds:
            os.close(fd)
    reader = _CappedReader({"stdout": proc.stdout.fileno(), "stderr": proc.stderr.fileno(),
                            **host_ends},
                           {"stdout": limits.keep_bytes, "stderr": limits.keep_bytes,
                            "channel": limits.channel_bytes})
    timed_out = overflow = channel_overflow = False
    try:
        while True:
            remaining = start + limits.wall_s - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not reader.pump(min(remaining, 0.5)):  # every stream ended: wait for the exit
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(min(remaining, 0.1))
                if proc.poll() is not None:
                    break
            overflow = reader.read["stdout"] + reader.read["stderr"] > limits.read_bytes
            channel_overflow = reader.read.get("channel", 0) > limits.channel_bytes
            if overflow or channel_overflow:
                break
        if timed_out or overflow or channel_overflow:
            _kill_namespace(proc)
        proc.wait()
        drain_until = time.monotonic() + 1.0   # the pipes close with the namespace
        while reader.pump(0.1) and time.monotonic() < drain_until:
            pass
    finally:
        reader.close()
        proc.stdout.close()
        proc.stderr.close()
        for fd in host_ends.values():
            os.close(fd)
    err = bytes(reader.kept["stderr"])
    if not timed_out and proc.returncode and err.startswith(b"bwrap: ") and \
            not reader.kept.get("channel"):  # bubblewrap failed before the command started
        raise SandboxUnavailable(f"bubblewrap could not set up the sandbox: "
                                 f"{err[:300].decode(errors='replace')}")
    return Result(None if timed_out else proc.returncode,
                  bytes(reader.kept["stdout"]).decode(errors="replace"),
                  err.decode(errors="replace"), timed_out, time.monotonic() - start,
                  overflow, bytes(reader.kept.get("channel", b"")), channel_overflow, key, uid)
