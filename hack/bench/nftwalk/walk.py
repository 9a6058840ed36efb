"""Driver: builds one 10k x 10 nat table per layout, each in its own network
namespace (prefix given on the command line; run.sh creates and deletes
them), then times small --noflush transactions, interleaved across layouts
and operations in shuffled rounds. Results go to results.jsonl."""
import json
import os
import random
import subprocess
import sys
import time

import gen

RESTORE = "iptables-nft-restore"


def restore(ns, payload, noflush=True):
    """Runs one restore; returns its wall time in s."""
    cmd = ["ip", "netns", "exec", ns, RESTORE] + (["--noflush"] if noflush else [])
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(payload.encode())
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("%s in %s failed: %s\n%s" % (RESTORE, ns, err.decode(), payload[:2000]))
    return wall


def timed(ns, payload):
    """Wall and rusage of the child (ip netns exec execs the restore in-process)."""
    cmd = ["ip", "netns", "exec", ns, RESTORE, "--noflush"]
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(r, 0)
        os.close(r)
        os.close(w)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.execvp(cmd[0], cmd)
    os.close(r)
    os.write(w, payload.encode())
    os.close(w)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise RuntimeError("restore failed (status %d) in %s:\n%s" % (status, ns, payload[:1500]))
    return wall, ru.ru_utime, ru.ru_stime


def count_rules(ns):
    out = subprocess.run(["ip", "netns", "exec", ns, "iptables-nft-save", "-t", "nat"],
                         check=True, capture_output=True, text=True).stdout
    return out.count("\n-A "), out.count("\n:")


def build(prefix, layout):
    ns = "%s-%s" % (prefix, layout)
    extra = ["KUBE-WALKDEL-%d" % k for k in range(40)]
    chunks = gen.build_chunks(layout, extra_chains=extra)
    t0 = time.perf_counter()
    for c in chunks[:-1]:
        restore(ns, c)
    t1 = time.perf_counter()
    restore(ns, chunks[-1])  # the base-chain jumps: first full walk
    t2 = time.perf_counter()
    rules, chains = count_rules(ns)
    return {"kind": "build", "layout": layout, "chunks": len(chunks), "build_s": t1 - t0,
            "base_jumps_s": t2 - t1, "rules": rules, "chains": chains}


def new_chain(name, rules):
    return "*nat\n:%s - [0:0]\n%s\nCOMMIT\n" % (name, "\n".join("-A %s %s" % (name, r) for r in rules))


def ops_for_round(rnd):
    """(layout, op, payload) of one round; services differ per round and op."""
    svc = lambda off: (rnd * 1009 + off) % gen.NSVC
    items = [(l, "chg", gen.change_payload(l, svc(123), rnd + 1)) for l in gen.LAYOUTS]
    for l in "ABDG":
        if l in gen.LAYOUTS:
            items.append((l, "noop", "*nat\nCOMMIT\n"))
    if "A" not in gen.LAYOUTS:
        return items
    a = lambda op, p: items.append(("A", op, p))
    tag = "KUBE-WALK-%d-" % rnd
    a("newchain_empty", "*nat\n:%se - [0:0]\nCOMMIT\n" % tag)
    a("newchain_plain", new_chain(tag + "p", ["-s 1.2.3.4/32"]))
    a("newchain_comment", new_chain(tag + "c", ['-m comment --comment "x"']))
    a("newchain_statistic", new_chain(tag + "s", ["-m statistic --mode random --probability 0.5000000000"]))
    a("newchain_return", new_chain(tag + "r", ["-j RETURN"]))
    a("newchain_jump", new_chain(tag + "j", ["-j KUBE-MARK-MASQ"]))
    a("newchain_dnat", new_chain(tag + "d", ["-p tcp -m tcp -j DNAT --to-destination 1.2.3.4:80"]))
    a("append_plain", "*nat\n-A %s -s 1.2.3.4/32\nCOMMIT\n" % gen.svc_chain(svc(5123)))
    i = svc(7123)
    a("delete_rule", "*nat\n%s\nCOMMIT\n" % gen.masq_rule(i, gen.svc_chain(i)).replace("-A ", "-D ", 1))
    a("delete_chain", "*nat\n:KUBE-WALKDEL-%d - [0:0]\n-X KUBE-WALKDEL-%d\nCOMMIT\n" % (rnd, rnd))
    return items


def main():
    prefix, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(out, "a") as f:
        def emit(rec):
            rec["loadavg"] = open("/proc/loadavg").read().split()[:3]
            rec["t"] = time.time()
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(json.dumps(rec), flush=True)
        for l in gen.LAYOUTS:
            emit(build(prefix, l))
        rng = random.Random(42)
        # round 0 is a warm-up, recorded but flagged.
        for rnd in range(rounds + 1):
            items = ops_for_round(rnd)
            rng.shuffle(items)
            for layout, op, payload in items:
                wall, ut, st = timed("%s-%s" % (prefix, layout), payload)
                emit({"kind": "op", "round": rnd, "warmup": rnd == 0, "layout": layout, "op": op,
                      "wall_ms": wall * 1e3, "user_ms": ut * 1e3, "sys_ms": st * 1e3})


if __name__ == "__main__":
    main()
