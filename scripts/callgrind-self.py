#!/usr/bin/env python3
"""Self instructions per request of a callgrind dump, summed by where the code comes from.

Reads a dump of scripts/bench-instructions.sh ($OUT/cg-<label>.out.1) and the requests wrk
counted in it ($OUT/wrk-<label>.txt), sums each cost line's self instructions by its source
file (code inlined from a crate counts as that crate's: the dump's fi=/fe= lines) and prints
them per request by item, then (with TOP) the TOP largest functions. The total matches the
dump's program total (callgrind_annotate's own listing mixes inclusive lines in).

Usage: scripts/callgrind-self.py DUMP REQUESTS [TOP]
"""
import collections
import re
import sys

ITEMS = [
    ("memcpy", r"memmove|memcpy"),
    ("httparse", r"httparse"),
    ("tokio", r"tokio-1"),
    ("malloc/free", r"malloc|arena\.c|__rdl_alloc|__rust_alloc|__rust_dealloc|_int_free|cfree"),
    ("the routing core", r"berth-routing/"),
    ("the model scan", r"model_scan"),
    ("UTF-8 checks, memchr, memcmp, memset", r"validations\.rs|memchr|memcmp|memset|converts\.rs"),
    ("bytes", r"bytes-1"),
    ("http crate", r"/http-1\."),
    ("clock reads", r"time\.rs|clock_gettime|vdso"),
    ("prometheus-client", r"prometheus"),
    ("SipHash, hashbrown", r"sip\.rs|hashbrown"),
    ("libc syscall wrappers", r"sysdeps/unix|cancellation\.c"),
    ("std and arc-swap", r"arc-swap|thread/local\.rs|poll_fn\.rs"),
]
OWN = "the gateway's own code and the std code inlined into it"


def self_costs(path):
    """(file, function) -> self instructions."""
    tables = {"fl": {}, "fn": {}, "ob": {}}
    kind_of = {"fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
               "fn": "fn", "cfn": "fn", "ob": "ob", "cob": "ob"}

    def name(key, value):
        m = re.match(r"\((\d+)\)(?: (.*))?", value)
        if not m:
            return value
        table = tables[kind_of[key]]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), "?")

    cost = collections.Counter()
    fl = fn = src = None
    skip = False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if skip:  # the line after calls= is the call's inclusive cost
                skip = False
                continue
            m = re.match(r"^([a-z]+)=(.*)", line)
            if m:
                key, value = m.groups()
                if key in kind_of:
                    n = name(key, value)
                    if key == "fl":
                        fl = src = n
                    elif key in ("fi", "fe"):
                        src = n
                    elif key == "fn":
                        fn, src = n, fl
                elif key == "calls":
                    skip = True
                continue
            if line[0] in "0123456789+-*":
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    cost[(src, fn)] += int(parts[1])
    return cost


def main():
    path, reqs = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    cost = self_costs(path)
    by = collections.Counter()
    for (src, fn), v in cost.items():
        where = f"{src or ''} {fn or ''}"
        by[next((item for item, pat in ITEMS if re.search(pat, where)), OWN)] += v
    print(f"{sum(cost.values()) // reqs:7d} total per request")
    for item, v in by.most_common():
        print(f"{v // reqs:7d} {item}")
    for (src, fn), v in cost.most_common(top):
        print(f"{v // reqs:7d} {src} {fn}"[:170])


if __name__ == "__main__":
    main()
