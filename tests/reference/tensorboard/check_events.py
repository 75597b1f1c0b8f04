#!/usr/bin/python3
"""MAINTAINER-ONLY CHECK (needs `pip install tensorboard`; the product has no Python).

Reads a Bastion event file with TensorBoard's own loader and compares every scalar with rounds.csv:

    build/bastion run configs/demo.toml --set rounds=5 --out /tmp/tb-run --tensorboard /tmp/tb-board
    python3 tests/reference/tensorboard/check_events.py /tmp/tb-board /tmp/tb-run/rounds.csv

Exits 1 on the first difference (a tag missing, a step missing, a value off by more than float32 rounding).
"""
import csv
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    board, rounds_csv = sys.argv[1], sys.argv[2]
    acc = EventAccumulator(board, size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    rows = list(csv.DictReader(open(rounds_csv)))
    checked = 0
    for column in rows[0].keys():
        if column == "round":
            continue
        expected = {int(r["round"]): float(r[column]) for r in rows if r[column] != "" and math.isfinite(float(r[column]))}
        if not expected:
            if column in tags:
                sys.exit("tag %s has values but rounds.csv has none" % column)
            continue
        if column not in tags:
            sys.exit("tag %s missing (tags: %s)" % (column, sorted(tags)))
        got = {e.step: e.value for e in acc.Scalars(column)}
        if sorted(got) != sorted(expected):
            sys.exit("tag %s: steps %s, rounds.csv %s" % (column, sorted(got), sorted(expected)))
        for step, value in expected.items():
            if abs(got[step] - value) > 1e-6 * max(1.0, abs(value)):
                sys.exit("tag %s step %d: %r, rounds.csv %r" % (column, step, got[step], value))
            checked += 1
    print("tensorboard %s read %d tags, %d values equal to rounds.csv" % (
        __import__("tensorboard").__version__, len(tags), checked))


if __name__ == "__main__":
    main()
