"""Generator of kube-proxy-shaped nat payloads for the nft validation-walk experiment.

Layouts (10k services x 10 endpoints by default):
  A  kube-proxy: KUBE-SERVICES -> KUBE-SVC (masq + statistic jumps) -> KUBE-SEP
     (hairpin -s ep -j KUBE-MARK-MASQ + DNAT); PREROUTING and OUTPUT jump to
     KUBE-SERVICES, POSTROUTING to KUBE-POSTROUTING.
  B  A without any jump from a base chain.
  C  A with KUBE-SEP chains holding only the DNAT rule.
  D  no KUBE-SEP chains: KUBE-SVC holds the statistic DNAT rules directly.
  E  A with only PREROUTING -> KUBE-SERVICES (no OUTPUT jump).
  F  D with only PREROUTING -> KUBE-SERVICES (best case of D and E).
  G  D without comment matches (-m comment is an xt compat match in
     iptables-nft 1.8.9 and has a validate hook).
  H  G with only PREROUTING -> KUBE-SERVICES: the floor of this experiment.
"""
import base64
import os
import hashlib

NSVC = int(os.environ.get("WALK_NSVC", "10000"))
NEP = 10
CHUNK = 4000
CLUSTER_CIDR = "10.244.0.0/16"
MARK = "0x4000"
NODEPORTS_NOTE = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"

LAYOUTS = os.environ.get("WALK_LAYOUTS", "ABCDEF")


def has_sep(layout):
    return layout in "ABCE"


def has_hairpin(layout):
    return layout in "ABE"


def base_targets(layout):
    """Base chains that jump to KUBE-SERVICES."""
    return {"A": ["PREROUTING", "OUTPUT"], "B": [], "C": ["PREROUTING", "OUTPUT"],
            "D": ["PREROUTING", "OUTPUT"], "E": ["PREROUTING"], "F": ["PREROUTING"],
            "G": ["PREROUTING", "OUTPUT"], "H": ["PREROUTING"]}[layout]


def comment(layout, text):
    """A comment match, or nothing in layouts G and H."""
    return "" if layout in "GH" else '-m comment --comment "%s"' % text


def join(*parts):
    return " ".join(p for p in parts if p)


def chain_hash(prefix, *parts):
    h = hashlib.sha256("/".join(parts).encode()).digest()
    return prefix + base64.b32encode(h).decode()[:16]


def svc_name(i):
    return "ns%d/svc-%d:http" % (i % 50, i)


def cluster_ip(i):
    n = i + 1
    return "172.30.%d.%d" % (n >> 8, n & 255)


def ep_ip(i, j):
    n = i * NEP + j + 1
    return "10.%d.%d.%d" % (64 + (n >> 16), (n >> 8) & 255, n & 255)


def svc_chain(i):
    return chain_hash("KUBE-SVC-", svc_name(i), "tcp")


def sep_chain(i, ep):
    return chain_hash("KUBE-SEP-", svc_name(i), "tcp", ep)


def prob(k):
    return "%0.10f" % (1.0 / k)


def masq_rule(i, chain):
    return ('-A %s ! -s %s -d %s/32 -p tcp -m comment --comment "%s cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ'
            % (chain, CLUSTER_CIDR, cluster_ip(i), svc_name(i)))


def sep_rules(layout, i, ep, chain):
    ip = ep.split(":")[0]
    out = []
    if has_hairpin(layout):
        out.append('-A %s -s %s/32 -m comment --comment "%s" -j KUBE-MARK-MASQ' % (chain, ip, svc_name(i)))
    out.append('-A %s -p tcp -m comment --comment "%s" -m tcp -j DNAT --to-destination %s' % (chain, svc_name(i), ep))
    return out


def endpoints(i):
    return ["%s:8080" % ep_ip(i, j) for j in range(NEP)]


def service_chains(layout, i, eps=None):
    """Chains (name, rules) of one service, bottom-up (SEP chains first)."""
    eps = eps or endpoints(i)
    svc = svc_chain(i)
    chains = []
    rules = []
    if has_sep(layout):
        rules.append(masq_rule(i, svc))
    for k, ep in enumerate(eps):
        stat = "" if k == len(eps) - 1 else "-m statistic --mode random --probability " + prob(len(eps) - k)
        cmt = comment(layout, "%s -> %s" % (svc_name(i), ep))
        if has_sep(layout):
            sep = sep_chain(i, ep)
            chains.append((sep, sep_rules(layout, i, ep, sep)))
            rules.append(join("-A", svc, cmt, stat, "-j", sep))
        else:
            rules.append(join("-A", svc, "-p tcp", cmt, stat, "-m tcp -j DNAT --to-destination", ep))
    chains.append((svc, rules))
    return chains


def services_rule(i, layout="A"):
    return join("-A KUBE-SERVICES -d %s/32 -p tcp" % cluster_ip(i), comment(layout, svc_name(i) + " cluster IP"),
                "-m tcp --dport 80 -j", svc_chain(i))


def table_payload(chains, deletes=()):
    lines = ["*nat"]
    lines += [":%s - [0:0]" % n for n, _ in chains]
    lines += [":%s - [0:0]" % n for n in deletes]
    for _, rules in chains:
        lines += rules
    lines += ["-X %s" % n for n in deletes]
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def build_chunks(layout, nsvc=NSVC, extra_chains=()):
    """Payloads that build the table, bottom-up, ~CHUNK rules each, whole chains declared."""
    first = [("KUBE-MARK-MASQ", ["-A KUBE-MARK-MASQ -j MARK --or-mark " + MARK]),
             ("KUBE-POSTROUTING", ["-A KUBE-POSTROUTING -m mark ! --mark %s/%s -j RETURN" % (MARK, MARK),
                                   "-A KUBE-POSTROUTING -j MARK --xor-mark " + MARK,
                                   '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully']),
             ("KUBE-NODEPORTS", [])]
    first += [(n, []) for n in extra_chains]
    out = [table_payload(first)]
    cur, n = [], 0
    for i in range(nsvc):
        for c in service_chains(layout, i):
            cur.append(c)
            n += 1 + len(c[1])
        if n >= CHUNK:
            out.append(table_payload(cur))
            cur, n = [], 0
    if cur:
        out.append(table_payload(cur))
    svcs = [services_rule(i, layout) for i in range(nsvc)]
    svcs.append('-A KUBE-SERVICES -m comment --comment "%s" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS' % NODEPORTS_NOTE)
    out.append(table_payload([("KUBE-SERVICES", svcs)]))
    out.append(base_payload(layout))
    return out


def base_payload(layout):
    lines = ["*nat"]
    for b in base_targets(layout):
        lines.append('-A %s -m comment --comment "kubernetes service portals" -j KUBE-SERVICES' % b)
    if layout != "B":
        lines.append('-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING')
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def change_payload(layout, i, gen):
    """What a one-endpoint change sends: service i's endpoint 0 is replaced by a new one."""
    eps = endpoints(i)
    old = eps[0]
    eps[0] = "10.200.%d.%d:8080" % (gen >> 8 & 255, gen & 255)
    chains = service_chains(layout, i, eps)
    if has_sep(layout):
        new_sep = sep_chain(i, eps[0])
        keep = [c for c in chains if c[0] in (new_sep, svc_chain(i))]
        return table_payload(keep, deletes=[sep_chain(i, old)])
    return table_payload(chains)


def reachable(layout, nsvc=NSVC):
    """(rules in the KUBE-SERVICES tree, base chains that jump to it, rule
    visits of one nft_table_validate). The walk visits every rule reachable
    from each base chain once per path: nft_chain_validate does not memoise,
    so KUBE-MARK-MASQ's one rule is revisited from every jump to it."""
    n_sep = (2 if has_hairpin(layout) else 1) if has_sep(layout) else 0
    tree = nsvc + 1  # KUBE-SERVICES rules incl. the nodeports jump
    visits = tree
    if has_sep(layout):
        tree += nsvc * (1 + NEP + NEP * n_sep)
        masq_jumps = nsvc * (1 + (NEP if has_hairpin(layout) else 0))
        visits = tree + masq_jumps  # KUBE-MARK-MASQ's rule per jump
    else:
        tree += nsvc * NEP
        visits = tree
    if has_sep(layout):
        tree += 1  # KUBE-MARK-MASQ's own rule, counted once
    bases = len(base_targets(layout))
    post = 4 if layout != "B" else 0  # POSTROUTING jump + KUBE-POSTROUTING
    return tree, bases, bases * (1 + visits) + post


if __name__ == "__main__":
    for l in LAYOUTS:
        print(l, reachable(l), sum(p.count("\n-A ") for p in build_chunks(l)))
