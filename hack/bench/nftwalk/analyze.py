"""Summarises results.jsonl: per (layout, op) median/min/max wall ms and
median user/sys ms of the child, excluding the warm-up round."""
import json
import statistics
import sys

import gen

recs = [json.loads(l) for l in open(sys.argv[1])]
builds = [r for r in recs if r["kind"] == "build"]
ops = [r for r in recs if r["kind"] == "op" and not r["warmup"]]
print("| layout | build s (chunks) | base-jump commit ms | rules in table | chains |")
print("|---|---|---|---|---|")
for b in builds:
    print("| %s | %.1f (%d) | %.0f | %d | %d |" % (b["layout"], b["build_s"], b["chunks"], b["base_jumps_s"] * 1e3, b["rules"], b["chains"]))
groups = {}
for r in ops:
    groups.setdefault((r["op"] != "chg", r["op"], r["layout"]), []).append(r)
print()
print("| layout | op | n | median ms | min ms | max ms | med user ms | med sys ms | tree rules | bases | rule visits |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (_, op, l), rs in sorted(groups.items()):
    w = [r["wall_ms"] for r in rs]
    tree, bases, visits = gen.reachable(l)
    print("| %s | %s | %d | %.1f | %.1f | %.1f | %.0f | %.0f | %d | %d | %d |" % (
        l, op, len(rs), statistics.median(w), min(w), max(w),
        statistics.median(r["user_ms"] for r in rs), statistics.median(r["sys_ms"] for r in rs), tree, bases, visits))
loads = [float(r["loadavg"][0]) for r in ops]
print("\nload avg (1 min) during ops: min %.2f median %.2f max %.2f" % (min(loads), statistics.median(loads), max(loads)))
