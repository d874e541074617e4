#!/usr/bin/env python3
"""Renders the per-figure Markdown tables of docs/results.md from the CSV files that
``switchyard experiment periodic-preemption --csv DIR`` writes.

Usage::

    python3 tools/results_tables.py DIR > tables.md

Each ``figN.csv`` has rows ``category,series,part,value``. A figure with one part per
series is a table of values; one with several parts (a stacked bar) is a table of totals
with the parts in parentheses; Figure 8's parts are percentages.
"""

import csv
import os
import sys
from collections import OrderedDict

FIGURES = ["fig6", "fig8", "fig14", "fig15", "fig16", "fig17"]


def load(path):
    """category -> series -> [(part, value)], in file order."""
    data = OrderedDict()
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            series = data.setdefault(row["category"], OrderedDict())
            series.setdefault(row["series"], []).append((row["part"], float(row["value"])))
    return data


def cell(fig, parts):
    if fig == "fig8":
        return " / ".join("%d" % round(100 * v) for _, v in parts) + " %"
    if len(parts) == 1:
        return "%.3f" % parts[0][1]
    total = sum(v for _, v in parts)
    return "%.2f (%s)" % (total, " + ".join("%.2f" % v for _, v in parts))


def table(fig, data):
    series = list(next(iter(data.values())).keys())
    out = ["| kernel | " + " | ".join(series) + " |",
           "| --- | " + " | ".join("---:" for _ in series) + " |"]
    for category, by_series in data.items():
        name = "**geomean**" if category == "geomean" else category
        cells = [cell(fig, by_series[s]) if s in by_series else "" for s in series]
        out.append("| %s | %s |" % (name, " | ".join(cells)))
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for fig in FIGURES:
        path = os.path.join(sys.argv[1], fig + ".csv")
        print("### %s\n\n%s\n" % (fig, table(fig, load(path))))


if __name__ == "__main__":
    main()
