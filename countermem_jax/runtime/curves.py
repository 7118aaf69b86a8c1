"""Curves of a run as TensorBoard event files under ``WORKDIR/curves/``, to watch a long run
(``tensorboard --logdir WORKDIR/curves``) and to draw the selector's learning curve in the report.
"""
import contextlib
import logging
import math
import pathlib
import struct

log = logging.getLogger(__name__)

_warned = False


class CurveWriter:
    """Scalar curves of one run in ``logdir``; every call is a no-op once closed."""

    def __init__(self, logdir):
        global _warned
        self.logdir = pathlib.Path(logdir)
        try:
            import tensorboardX
        except ImportError:
            if not _warned:
                log.warning("tensorboardX is not installed (pip install -e '.[curves]'): no curves "
                            "are written under %s", self.logdir)
                _warned = True
            self._writer = None
            return
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._writer = tensorboardX.SummaryWriter(str(self.logdir), flush_secs=30)

    def scalars(self, step: int, values: dict) -> None:
        """Writes each finite ``{tag: value}`` at ``step`` (TensorBoard groups tags by '/')."""
        if self._writer is None:
            return
        for tag, value in values.items():
            if value is not None and math.isfinite(float(value)):
                self._writer.add_scalar(tag, float(value), int(step))

    def close(self) -> None:
        """Flushes and closes the event file. A flush the file system refuses (a full disk)
        loses only the points not yet written, which a resumed run writes again: logged at
        INFO (the phase's own write error is the line a user reads), not raised, and not
        tried again at exit."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()
            except OSError as err:
                log.info("curves under %s: last points not written (%s)", self.logdir,
                         err.strerror or err)
                with contextlib.suppress(AttributeError, OSError):   # tensorboardX's own
                    events = writer.file_writer.event_writer
                    events._closed = True   # its exit handler would flush again
                    events._worker.stop()


def read_scalars(logdir) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...] by step} from every event file directly in ``logdir``, older
    files first so that a resumed run's rewrite of a step wins; {} when there is none."""
    from tensorboardX.proto import event_pb2
    curves: dict[str, dict[int, float]] = {}
    for path in sorted(pathlib.Path(logdir).glob("events.out.tfevents.*"),
                       key=lambda p: (p.stat().st_mtime, p.name)):
        for record in _records(path.read_bytes()):
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                curves.setdefault(value.tag, {})[int(event.step)] = float(value.simple_value)
    return {tag: sorted(points.items()) for tag, points in curves.items()}


def _records(data: bytes):
    """The payloads of a TFRecord file: length (u64), its CRC, payload, payload CRC; a record
    cut short by a kill ends the file."""
    offset = 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[offset:offset + 8])
        start = offset + 12
        if start + length + 4 > len(data):
            return
        yield data[start:start + length]
        offset = start + length + 4
