#!/usr/bin/python3
"""The README's policy walkthrough shows policies/xshare.mlir line for line: the mlir
code blocks of the "Writing a policy" section, joined, equal the file after its header
comment. Run: python3 test/docs/readme_walkthrough.py"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    readme = open(os.path.join(ROOT, "README.md")).read()
    section = readme.split("## Writing a policy", 1)[1].split("\n## ", 1)[0]
    shown = [line for block in re.findall(r"```mlir\n(.*?)```", section, re.S)
             for line in block.rstrip("\n").split("\n")]
    lines = open(os.path.join(ROOT, "policies", "xshare.mlir")).read().rstrip("\n").split("\n")
    start = next(i for i, line in enumerate(lines) if not line.startswith("//"))
    policy = lines[start:]
    if shown == policy:
        print("1 passed, 0 failed")
        return 0
    for i, (a, b) in enumerate(zip(shown, policy)):
        if a != b:
            print(f"README line {i} differs:\n  README: {a}\n  policy: {b}")
            break
    else:
        print(f"README shows {len(shown)} lines, the policy has {len(policy)}")
    print("0 passed, 1 failed")
    return 1


if __name__ == "__main__":
    sys.exit(main())
