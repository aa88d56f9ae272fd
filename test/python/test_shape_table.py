#!/usr/bin/env python3
"""The shape parameter table (include/switchyard/Dialect/Moe/ShapeParameters.def) is read
the same way everywhere: the Python package's keywords (switchyard/_shapes.py, from the
build tree's copy and from the source tree) equal the rows the C++ preprocessor made
(the extension's shape_parameters()), every row is a flag of moe-compile and moe-opt with
its help text, and every row is an option of moe-opt's --moe-specialize (Passes.td).

Run: python test/python/test_shape_table.py --build build
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True

failed = 0


def check(label, ok, detail=""):
    global failed
    print(f"{'ok  ' if ok else 'FAIL'} {label}" + ("" if ok else f" {detail}"))
    failed += not ok


def load_source_shapes():
    """python/switchyard/_shapes.py as test/support/policy_shapes.py loads it (no package)."""
    spec = importlib.util.spec_from_file_location(
        "source_shapes", os.path.join(ROOT, "python", "switchyard", "_shapes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def normalized(rows):
    """Rows with config_keys as a tuple (the extension gives the .def's string)."""
    out = []
    for row in rows:
        row = dict(row)
        if isinstance(row["config_keys"], str):
            row["config_keys"] = tuple(row["config_keys"].split())
        out.append(row)
    return out


def help_options(text, section_start=None):
    """`--name=<value> - help` lines of a tool's --help (the top-level options, or those
    under `section_start` up to the next line indented as much), as {name: (value, help)}."""
    lines = [line for line in text.splitlines() if line.startswith("  --")]
    if section_start is not None:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(section_start))
        indent = len(lines[start]) - len(lines[start].lstrip())
        body = []
        for line in lines[start + 1:]:
            if len(line) - len(line.lstrip()) <= indent:
                break
            body.append(line)
        lines = body
    options = {}
    for line in lines:
        m = re.match(r"\s*--([a-z0-9_-]+)(?:=<([^>]*)>)?\s+- (.*)$", line)
        if m:
            options[m.group(1)] = (m.group(2) or "", m.group(3).strip())
    return options


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(build, "python"))
    from switchyard import _shapes, _switchyard

    compiled = normalized(_switchyard.shape_parameters())
    check("the table has rows", len(compiled) >= 11, f"({len(compiled)})")
    check("build tree's _shapes.SHAPE_TABLE == the extension's shape_parameters()",
          list(_shapes.SHAPE_TABLE) == compiled,
          f"\n  python: {_shapes.SHAPE_TABLE}\n  c++:    {compiled}")
    source = load_source_shapes()
    check("source tree's _shapes.py (include/...def) reads the same table",
          list(source.SHAPE_TABLE) == compiled)
    check("SHAPE_PARAMS are the table's names",
          _shapes.SHAPE_PARAMS == tuple(row["name"] for row in compiled))
    for row in compiled:
        check(f"{row['name']}: flag is the name with '-'",
              row["flag"] == row["name"].replace("_", "-"), f"({row['flag']})")
        check(f"{row['name']}: kind", row["kind"] in ("Int", "Number", "Bool"))

    bin_dir = os.path.join(build, "bin")
    compile_help = subprocess.run([os.path.join(bin_dir, "moe-compile"), "--help"],
                                  capture_output=True, text=True).stdout
    opt_help = subprocess.run([os.path.join(bin_dir, "moe-opt"), "--help"],
                              capture_output=True, text=True).stdout
    for tool, text in (("moe-compile", compile_help), ("moe-opt", opt_help)):
        flags = help_options(text)
        for row in compiled:
            got = flags.get(row["flag"])
            check(f"{tool} --{row['flag']}: value and help from the table",
                  got == (row["value_desc"], row["help"]), f"(--help says {got})")
    specialize = help_options(opt_help, "--moe-specialize ")
    check("moe-opt --moe-specialize's options (Passes.td) are the table's names",
          sorted(specialize) == sorted(row["name"] for row in compiled),
          f"(options {sorted(specialize)})")

    print(f"{'FAILED' if failed else 'passed'}: {failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
