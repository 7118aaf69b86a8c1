"""The coding action: one localized edit, or a unified diff."""
import dataclasses
import re


class EditError(ValueError):
    """The action is not a valid edit for this repository; the message says why."""


@dataclasses.dataclass(frozen=True)
class LocalizedEdit:
    path: str
    start: int
    end: int
    replacement: str

    def apply(self, text: str) -> str:
        lines = text.splitlines(keepends=True)
        if not 1 <= self.start <= self.end + 1 or self.end > len(lines):
            raise EditError(f"lines {self.start}-{self.end} are outside {self.path} "
                            f"({len(lines)} lines)")
        block = self.replacement
        if block and not block.endswith("\n"):
            block += "\n"
        return "".join(lines[: self.start - 1]) + block + "".join(lines[self.end:])


_EDIT = re.compile(r"FILE:\s*(?P<path>\S+)\s*\n\s*LINES?:\s*(?P<start>\d+)\s*(?:-\s*(?P<end>\d+))?"
                   r"\s*\n\s*REPLACE:[ \t]*\n?(?P<body>.*)", re.S | re.I)


def parse_localized(text: str) -> LocalizedEdit | None:
    m = _EDIT.search(text)
    if not m:
        return None
    body = m.group("body")
    fence = re.match(r"\s*```[\w+-]*\n(.*?)```", body, re.S)
    body = fence.group(1) if fence else body.rstrip("\n")
    start = int(m.group("start"))
    end = int(m.group("end") or start)
    if end < start - 1:
        raise EditError(f"LINES {start}-{end}: the end comes before the start")
    return LocalizedEdit(m.group("path").strip("`'\""), start, end, body)


@dataclasses.dataclass(frozen=True)
class FilePatch:
    path: str
    hunks: tuple  # (old_start, old_lines[list], new_lines[list])
    new_file: bool = False


def parse_unified_diff(text: str) -> list[FilePatch]:
    patches, current, hunks, new_file, old_path = [], None, [], False, None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- "):
            old_path = line[4:].split("\t")[0].strip()
        elif line.startswith("+++ "):
            if current is not None:
                patches.append(FilePatch(current, tuple(hunks), new_file))
            path = line[4:].split("\t")[0].strip()
            current = path[2:] if path.startswith(("a/", "b/")) else path
            new_file = old_path == "/dev/null"
            hunks = []
        elif line.startswith("@@") and current is not None:
            m = re.match(r"@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", line)
            if not m:
                raise EditError(f"bad hunk header {line!r}")
            old, new = [], []
            i += 1
            while i < len(lines) and not lines[i].startswith(("@@", "--- ", "+++ ", "diff ")):
                body = lines[i]
                tag, rest = (body[:1], body[1:]) if body else (" ", "")
                if tag in (" ", "-"):
                    old.append(rest)
                if tag in (" ", "+"):
                    new.append(rest)
                i += 1
            hunks.append((int(m.group(1)), old, new))
            continue
        i += 1
    if current is not None:
        patches.append(FilePatch(current, tuple(hunks), new_file))
    if not patches or not any(p.hunks for p in patches):
        raise EditError("no file hunks found in the diff")
    return patches


def apply_hunks(text: str, patch: FilePatch) -> str:
    lines = text.splitlines()
    offset = 0
    for old_start, old, new in patch.hunks:
        at = old_start - 1 + offset
        if lines[at: at + len(old)] != old:
            found = next((j for j in range(len(lines)) if lines[j: j + len(old)] == old), None)
            if found is None:
                raise EditError(f"hunk at line {old_start} of {patch.path} does not match the file")
            at = found
        lines[at: at + len(old)] = new
        offset += len(new) - len(old)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")
