#!/usr/bin/env bash
# compare.sh [-m] [-c] A.tar B.tar: compare the file systems of two images.
#
# A and B are image archives: docker-archive (`podman save`, `docker save`,
# hack/image/build.sh's _output/images/*.tar) or oci-archive. Each image's
# layers are applied in order (whiteouts honoured) and the result listed, one
# line per path:
#   path type mode uid gid size sha256 linktarget
# type: d dir, f file, l symlink, c/b device (linktarget major,minor), p fifo.
# Hard links are listed as the file they share content with (type f), since
# which name of a link group a tar writer stores first is arbitrary.
# An oci-archive holding an image index (`make image`) is read for PLATFORM
# (default linux/amd64).
# Prints `diff -u` of the two listings and a count of differing paths.
#   -m  also compare mtimes (same SOURCE_DATE_EPOCH for both builds)
#   -c  also compare the image config (Entrypoint, Cmd, Env, User, ...)
# Exit status: 0 identical, 1 different, 2 usage or read error.
set -euo pipefail
opts=()
while getopts mc o; do
  case "$o" in m|c) opts+=("-$o") ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: $0 [-m] [-c] A.tar B.tar" >&2; exit 2; }
for f in "$1" "$2"; do [ -r "$f" ] || { echo "compare.sh: cannot read $f" >&2; exit 2; }; done

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

# list ARCHIVE [-m] [-c]: the flattened listing, sorted by path.
list() {
  python3 - "$@" <<'EOF'
import hashlib, json, os, sys, tarfile
arc, opts = sys.argv[1], set(sys.argv[2:])
outer = tarfile.open(arc)
def read(name): return outer.extractfile(name).read()
if "manifest.json" in outer.getnames():           # docker-archive
    m = json.loads(read("manifest.json"))[0]
    layers, config = m["Layers"], json.loads(read(m["Config"]))
else:                                             # oci-archive
    blob = lambda d: "blobs/" + d.replace(":", "/")
    m = json.loads(read("index.json"))["manifests"][0]
    m = json.loads(read(blob(m["digest"])))
    if "manifests" in m:                          # an image index: PLATFORM's image
        want = os.environ.get("PLATFORM", "linux/amd64")
        m = next(d for d in m["manifests"] if d.get("platform") and
                 d["platform"]["os"] + "/" + d["platform"]["architecture"] == want)
        m = json.loads(read(blob(m["digest"])))
    layers = [blob(l["digest"]) for l in m["layers"]]
    config = json.loads(read(blob(m["config"]["digest"])))

fs = {}  # path -> (type, mode, uid, gid, size, sha, target, mtime)
def esc(s): return s.replace("\\", "\\\\").replace(" ", "\\040").replace("\n", "\\n")
def norm(p):                                      # "./a/b/" -> "/a/b"
    return esc("/" + "/".join(x for x in p.split("/") if x not in ("", ".")))
def drop_below(d):
    for p in [p for p in fs if p.startswith(d.rstrip("/") + "/")]: del fs[p]
for layer in layers:
    tf = tarfile.open(fileobj=outer.extractfile(layer), mode="r:*")
    members = tf.getmembers()
    for t in members:                             # whiteouts hide lower layers
        p = norm(t.name); d, _, base = p.rpartition("/"); d = d or "/"
        if base == ".wh..wh..opq": drop_below(d)
        elif base.startswith(".wh."):
            victim = norm(d + "/" + base[4:]); fs.pop(victim, None); drop_below(victim)
    for t in members:
        p = norm(t.name)
        if p.rpartition("/")[2].startswith(".wh."): continue
        if t.isdir(): typ, size, sha, tgt = "d", 0, "-", "-"
        elif t.issym(): typ, size, sha, tgt = "l", 0, "-", esc(t.linkname)
        elif t.islnk():                           # content of the link target
            typ, _, _, _, size, sha, tgt, _ = fs[norm(t.linkname)]
        elif t.isreg():
            typ, size, tgt = "f", t.size, "-"
            sha = hashlib.sha256(tf.extractfile(t).read()).hexdigest()
        elif t.ischr() or t.isblk():
            typ, size, sha, tgt = "c" if t.ischr() else "b", 0, "-", f"{t.devmajor},{t.devminor}"
        else: typ, size, sha, tgt = "p", 0, "-", "-"
        if typ != "d" and fs.get(p, "-")[0] == "d": drop_below(p)  # dir replaced
        fs[p] = (typ, "%04o" % (t.mode & 0o7777), t.uid, t.gid, size, sha, tgt, t.mtime)
fs.pop("/", None)  # the root's own entry: some writers store it, others don't
for p in sorted(fs):
    typ, mode, uid, gid, size, sha, tgt, mtime = fs[p]
    print(p, typ, mode, uid, gid, size, sha, tgt, *([int(mtime)] if "-m" in opts else []))
if "-c" in opts:
    c = config.get("config") or {}
    for k in ("Entrypoint", "Cmd", "Env", "User", "WorkingDir", "ExposedPorts", "Labels"):
        print("#config", k, json.dumps(c.get(k), sort_keys=True))
EOF
}
list "$1" "${opts[@]}" >"$tmp/a" || exit 2
list "$2" "${opts[@]}" >"$tmp/b" || exit 2
if diff -u --label "$1" --label "$2" "$tmp/a" "$tmp/b"; then
  echo "identical: $(wc -l <"$tmp/a") paths" >&2
  exit 0
fi
# differing paths: lines in only one listing, counted once per path.
key() { awk '{print $1 == "#config" ? $1 " " $2 : $1}'; }
m="$(sort "$tmp/a" "$tmp/b" | uniq -u | key | sort -u | wc -l)"
n="$(cat "$tmp/a" "$tmp/b" | key | sort | uniq -u | wc -l)"
echo "differ: $m path(s), $n of them only in one image" >&2
exit 1
