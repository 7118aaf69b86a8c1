"""Replays recorded checker outputs for `lake env lean FILE` and `verus FILE` (tests only: Lean 4
and Verus cannot be installed on CI machines). The first recording whose regex matches the file
wins; FILE in the recorded output is replaced by the file's path."""
import json
import os
import re
import sys
import time


def main(tool: str, path: str) -> int:
    with open(os.path.join(os.path.dirname(__file__), "recordings.json")) as f:
        recordings = [r for r in json.load(f) if r["tool"] == tool]
    text = open(path, encoding="utf-8").read()
    for rec in recordings:
        if re.search(rec["match"], text):
            if rec.get("sleep"):
                time.sleep(rec["sleep"])
            sys.stdout.write(rec["output"].replace("FILE", path))
            return rec["rc"]
    return 2
