"""bench/callgrind.py: reads `callgrind_annotate` output for the stage tables
of bench/controller/stages.py and bench/webhook/stages.py."""
import re
import sys

_ROW = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)  (\S.*?)(?: \[(.*)\])?$")


def load(path):
    """Cost per (file name, function) from the first table of an annotation
    (the one headed file:function), and the library of each where the
    annotation names it. callgrind_annotate lists some functions twice, once
    with the file's full path and its library, once without: the two are one
    function, counted once (the larger figure)."""
    costs, libs, section = {}, {}, False
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.rstrip().endswith("file:function"):
            section = True
            continue
        if not section:
            continue
        if costs and (not line.strip() or line.startswith("-----")):
            break
        m = _ROW.match(line)
        if not m or m.group(2).startswith("=>"):
            continue
        where = m.group(2)
        fn = where[where.rfind(":") + 1:] if ":" in where else where
        key = (where[: -len(fn) - 1].split("/")[-1], fn)
        costs[key] = max(costs.get(key, 0), int(m.group(1).replace(",", "")))
        if m.group(3):
            libs[key] = m.group(3).split("/")[-1]
        elif where.startswith("./"):  # glibc's own sources
            libs.setdefault(key, "libc.")
    return costs, libs


def total_of(path):
    """The annotation's PROGRAM TOTALS."""
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)  PROGRAM TOTALS", line)
        if m:
            return int(m.group(1).replace(",", ""))
    sys.exit("callgrind.py: no PROGRAM TOTALS in %s" % path)
