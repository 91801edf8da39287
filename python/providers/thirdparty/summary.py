"""The summary of a run of scripts/ecosystem-judge: one Markdown table of
every third-party kernel's rows (kernel, upstream version, property, cases
judged, failures, unavailable, the first failure's shrunk case), apart from
bitparity's own subjects, then each failure with its reproduce command.

    python3 python/providers/thirdparty/summary.py OUTDIR > OUTDIR/summary.md

OUTDIR holds what ecosystem-judge wrote: ``versions.json``,
``<name>.json`` (bitparity's summary), ``<name>.log`` (its terminal output)
and ``<name>.rc`` (its exit code) for each line of providers.tsv.
Standard library only (the GPU host's Python may lack the rest).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def providers():
    rows = []
    with open(os.path.join(HERE, "providers.tsv")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, op, dist, command = line.rstrip("\n").split("\t")
                rows.append((name, op, dist, command))
    return rows


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def cell(text, limit=110):
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def main(out):
    versions = json.loads(read(os.path.join(out, "versions.json"), "{}"))
    lines = ["# Third-party kernels judged by bitparity", ""]
    host = versions.get("host", {})
    if host:
        lines.append("Host: " + ", ".join("%s %s" % kv for kv in sorted(host.items())) + ".")
        lines.append("")
    lines += ["| kernel | upstream | op | property | judged | failures | unavailable | n/a | first failure (shrunk) |",
              "|---|---|---|---|---:|---:|---:|---:|---|"]
    details = []
    for name, op, dist, command in providers():
        version = versions.get("dists", {}).get(dist) or "not installed"
        upstream = "%s %s" % (dist, version)
        rc = (read(os.path.join(out, name + ".rc"), "") or "").strip()
        report = read(os.path.join(out, name + ".json"))
        if not rc and report is None:
            continue  # not among the providers this run judged
        if report is None:
            log = (read(os.path.join(out, name + ".log"), "") or "").strip().splitlines()
            why = log[-1] if log else "no output"
            lines.append("| %s | %s | %s | (not run: exit %s) | - | - | - | - | %s |" % (
                name, upstream, op, rc or "?", cell(why)))
            continue
        d = json.loads(report)
        subject = "exec:python3 " + command
        failures = {}
        for o in d.get("ops", []):
            for fl in o.get("failures", []):
                if fl.get("subject") == subject:
                    failures.setdefault(fl["property"], fl)
        for row in d.get("rows", []):
            if row.get("subject") != subject:
                continue
            prop = row["property"]
            na = row.get("not_applicable")
            fl = failures.get(prop)
            first = ""
            if fl:
                first = "%s -> %s: %s" % (fl.get("original_shape", ""), fl.get("shrunk_shape", ""), fl.get("message", ""))
                details.append((name, prop, fl))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, upstream, op, prop,
                "-" if na else row.get("cases", 0),
                "-" if na else row.get("failures", 0),
                row.get("unavailable", 0) or "",
                cell(na, 60) if na else (row.get("not_applicable_cases") or ""),
                cell(first)))
        if d.get("interrupted"):
            lines.append("| %s | | | (interrupted at the time budget: the rows hold the cases judged by then) | | | | | |" % name)
    lines.append("")
    for name, prop, fl in details:
        lines += ["## %s / %s" % (name, prop), "",
                  "%s, case %s (%s), shrunk to %s" % (cell(fl.get("message", ""), 600), fl.get("case_index"),
                                                     fl.get("original_shape"), fl.get("shrunk_shape")), "",
                  "```", (fl.get("shrunk_case") or "").rstrip()] + list(fl.get("reproduce", [])) + ["```", ""]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summary.py OUTDIR")
    main(sys.argv[1])
