#!/usr/bin/env python3
"""Where a kernel's warps stall, by source line: reads the source page of
an Nsight Compute report exported as CSV with CUDA and SASS interleaved

    ncu -i REPORT.ncu-rep --page source --csv --print-source cuda,sass > F.csv

(the report taken with --set full or the SourceCounters section, from a
build with -lineinfo) and prints the warp stall samples per reason, the
source lines with the most samples (each with its main reasons) and, for
each --region NAME=FILE:FIRST-LAST, the share of the samples in those
lines. A SASS row counts for the source line above it.

    python3 bench/inference/ncu_stalls.py F.csv --top 40 \\
        --region attention=decode_step.cu:470-640
"""
import argparse
import collections
import csv
import sys


def load(path):
    """Per (file, line): a Counter of samples, instructions and stall
    reasons; and the source text of each line."""
    per_line = collections.defaultdict(collections.Counter)
    text = {}
    header = None
    name = "?"
    line = None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "File Path":
                name = row[1].rsplit("/", 1)[-1]
                continue
            if row[0] == "Function Name":
                continue
            if row[0] == "Line No":
                header = row
                continue
            if header is None:
                continue
            if row[0] != "":
                line = (name, int(row[0]))
                text[line] = row[1]
                continue
            if line is None:
                continue
            c = per_line[line]
            for i, col in enumerate(header):
                if i < 4 or i >= len(row) or not row[i].isdigit():
                    continue
                v = int(row[i])
                if col == "Warp Stall Sampling (All Samples)":
                    c["samples"] += v
                elif col == "Instructions Executed":
                    c["instructions"] += v
                elif col.startswith("stall_") and "Not Issued" not in col:
                    c[col[len("stall_"):]] += v
    return per_line, text


def reasons(c, share):
    total = c["samples"]
    return ", ".join(
        "%s %d" % (k, v) for k, v in c.most_common()
        if k not in ("samples", "instructions") and v > share * total)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", help="the source page as CSV (cuda,sass)")
    p.add_argument("--top", type=int, default=30,
                   help="source lines to list (default 30)")
    p.add_argument("--region", action="append", default=[],
                   metavar="NAME=FILE:FIRST-LAST",
                   help="a range of source lines to total")
    a = p.parse_args()
    per_line, text = load(a.csv)
    total = collections.Counter()
    for c in per_line.values():
        total += c
    if total["samples"] == 0:
        sys.exit("no warp stall samples in %s (was SourceCounters "
                 "collected, and the source exported as cuda,sass?)" % a.csv)
    print("warp stall samples: %d; instructions executed: %d"
          % (total["samples"], total["instructions"]))
    print("by reason (%% of samples): " + ", ".join(
        "%s %.1f" % (k, 100.0 * v / total["samples"])
        for k, v in total.most_common()
        if k not in ("samples", "instructions") and v > 0))
    print("\nsource lines with the most samples:")
    top = sorted(per_line.items(), key=lambda kv: -kv[1]["samples"])
    for (name, ln), c in top[:a.top]:
        print("%s:%d %5.1f%% | %s | %s" % (
            name, ln, 100.0 * c["samples"] / total["samples"],
            text.get((name, ln), "").strip()[:64], reasons(c, 0.1)))
    if a.region:
        print("\nregions:")
    for r in a.region:
        try:
            label, where = r.split("=", 1)
            name, span = where.rsplit(":", 1)
            first, last = (int(x) for x in span.split("-"))
        except ValueError:
            sys.exit("--region %s: expected NAME=FILE:FIRST-LAST" % r)
        c = collections.Counter()
        for (fn, ln), v in per_line.items():
            if fn == name and first <= ln <= last:
                c += v
        print("%-12s %5.1f%% of samples, %d instructions | %s" % (
            label, 100.0 * c["samples"] / total["samples"],
            c["instructions"], reasons(c, 0.05)))


if __name__ == "__main__":
    main()
