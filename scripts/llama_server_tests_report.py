#!/usr/bin/env python3
"""Summary of scripts/llama-server-tests.sh's runs: passed/failed/skipped per
test file for Baton and for the real llama-server (whichever JUnit reports
exist in the folder given), and, when both exist, the tests that pass on the
reference but not on Baton, written one a line to reference-only.txt (and
each run's passing tests to passed-{baton,reference}.txt).

    scripts/llama_server_tests_report.py target/llama-server-tests
"""

import collections
import os
import sys
import xml.etree.ElementTree as ET

SERVERS = ("reference", "baton")


def outcomes(report):
    """Test id (file::name): passed, failed or skipped."""
    result = {}
    for case in ET.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")[-1] or "?"
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "failed"
            elif child.tag == "skipped" and kind == "passed":
                kind = "skipped"
        result[f"{module}::{case.get('name')}"] = kind
    return result


def main(folder):
    runs = {}
    for server in SERVERS:
        report = os.path.join(folder, f"report-{server}.xml")
        if os.path.isfile(report):
            runs[server] = outcomes(report)
            with open(os.path.join(folder, f"passed-{server}.txt"), "w") as out:
                out.writelines(f"{test}\n" for test, kind in sorted(runs[server].items()) if kind == "passed")
    if not runs:
        sys.exit(f"no report-*.xml in {folder}")
    counts = {server: collections.defaultdict(collections.Counter) for server in runs}
    for server, tests in runs.items():
        for test, kind in tests.items():
            counts[server][test.split("::")[0]][kind] += 1
    files = sorted({name for per in counts.values() for name in per})
    header = f"{'file':30}" + "".join(f" {server + ' pass/fail/skip':>28}" for server in runs)
    if len(runs) == 2:
        header += f" {'ref-only':>9}"
    print(header)
    only = set()
    if len(runs) == 2:
        only = {t for t, k in runs["reference"].items() if k == "passed" and runs["baton"].get(t) != "passed"}
        with open(os.path.join(folder, "reference-only.txt"), "w") as out:
            out.writelines(f"{test}\n" for test in sorted(only))
    total = {server: collections.Counter() for server in runs}
    for name in files + ["total"]:
        row = f"{name:30}"
        for server in runs:
            c = total[server] if name == "total" else counts[server][name]
            if name != "total":
                total[server].update(c)
            row += f" {c['passed']:>10}/{c['failed']:>6}/{c['skipped']:>6}    "
        if len(runs) == 2:
            n = len(only) if name == "total" else sum(1 for t in only if t.split("::")[0] == name)
            row += f" {n:>9}"
        print(row)


if __name__ == "__main__":
    main(sys.argv[1])
