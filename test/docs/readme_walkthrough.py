#!/usr/bin/python3
"""Keeps the README and the book (docs/) true.

  walkthrough  the mlir blocks of docs/tutorials/writing-a-policy.md (before "## Try it"),
               joined, equal policies/xshare.mlir after its header comment;
  blocks       every ```sh / ```bash / ```python block of README.md and of
               docs/tutorials/*.md runs (exit 0), in order, one scratch directory per
               file that links the checkout's build/, policies/, models/, examples/,
               scripts/, test/ and .venv/. A block that must not run here carries the
               line `<!-- norun: WHY -->` directly above it, with a reason;
  links        every relative link and image of README.md and docs/**/*.md names a file
               that exists, every #anchor a heading (GitHub's slugs) of the target
               markdown file, and docs/README.md (the book's index) links every page
               of the book.

Run: python3 test/docs/readme_walkthrough.py [walkthrough] [blocks] [links]
(no argument: all three). Prints one ok / FAIL line per check, then "N passed, M failed";
exit 1 on any failure. SWITCHYARD_DOCS_ROOT overrides the checkout (for tests of this
script)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.environ.get("SWITCHYARD_DOCS_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_LANGS = ("sh", "bash", "python")
BLOCK_TIMEOUT_S = 600
LINKED = ("build", "policies", "models", "examples", "scripts", "test", ".venv", "bench")

FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
NORUN = re.compile(r"<!--\s*norun:\s*(.*?)\s*-->\s*$")


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok   {what}")
        else:
            self.failed += 1
            print(f"FAIL {what}" + (f"\n     {detail}" if detail else ""))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rel(path):
    return os.path.relpath(path, ROOT)


def blocks_of(text):
    """(language, code, norun reason or None, line number) of each fenced block."""
    out = []
    for m in FENCE.finditer(text):
        line_no = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        norun = NORUN.match(before.strip())
        out.append((m.group(1).lower(), m.group(2), norun.group(1) if norun else None,
                    line_no))
    return out


# --- walkthrough -------------------------------------------------------------------------

def check_walkthrough(res):
    path = os.path.join(ROOT, "docs", "tutorials", "writing-a-policy.md")
    section = read(path).split("## Try it", 1)[0]
    shown = [line for lang, code, _, _ in blocks_of(section) if lang == "mlir"
             for line in code.rstrip("\n").split("\n")]
    lines = read(os.path.join(ROOT, "policies", "xshare.mlir")).rstrip("\n").split("\n")
    start = next(i for i, line in enumerate(lines) if not line.startswith("//"))
    policy = lines[start:]
    detail = ""
    if shown != policy:
        for i, (a, b) in enumerate(zip(shown, policy)):
            if a != b:
                detail = f"line {i} of the shown policy differs:\n  shown:  {a}\n  policy: {b}"
                break
        else:
            detail = f"the tutorial shows {len(shown)} lines, the policy has {len(policy)}"
    res.check(shown == policy,
              "walkthrough: docs/tutorials/writing-a-policy.md shows policies/xshare.mlir",
              detail)


# --- blocks ------------------------------------------------------------------------------

def doc_files_with_blocks():
    return [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "tutorials", "*.md")))


def scratch_dir():
    d = tempfile.mkdtemp(prefix="switchyard-docs-")
    for name in LINKED:
        if os.path.exists(os.path.join(ROOT, name)):
            os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    return d


def python_for_blocks():
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def check_blocks(res):
    python = python_for_blocks()
    for path in doc_files_with_blocks():
        blocks = blocks_of(read(path))
        work = scratch_dir()
        try:
            for lang, code, norun, line_no in blocks:
                where = f"{rel(path)}:{line_no}"
                if norun is not None:
                    res.check(norun != "", f"blocks: {where} ({lang}) not run: {norun}",
                              "a norun marker needs a reason: <!-- norun: WHY -->")
                    continue
                if lang not in RUN_LANGS:
                    continue
                cmd = ([python, "-c", code] if lang == "python"
                       else ["bash", "-euo", "pipefail", "-c", code])
                try:
                    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                                       timeout=BLOCK_TIMEOUT_S)
                    ok, out = r.returncode == 0, (r.stdout + r.stderr)[-3000:]
                    detail = f"exit {r.returncode}:\n{out}"
                except subprocess.TimeoutExpired:
                    ok, detail = False, f"still running after {BLOCK_TIMEOUT_S} s"
                res.check(ok, f"blocks: {where} ({lang}) runs", detail)
        finally:
            shutil.rmtree(work, ignore_errors=True)


# --- links -------------------------------------------------------------------------------

def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path):
    text = FENCE.sub("", read(path))
    anchors, seen = set(), {}
    for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")
    anchors.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return anchors


def markdown_files():
    files = [os.path.join(ROOT, "README.md")]
    files += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return files


def links_of(text):
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        yield m.group(1), text.count("\n", 0, m.start()) + 1


def check_links(res):
    anchor_cache = {}
    for path in markdown_files():
        bad = []
        count = 0
        for target, line_no in links_of(read(path)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                    if file_part else path)
            if not os.path.exists(dest):
                bad.append(f"line {line_no}: {target}: no such file {rel(dest)}")
                continue
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    bad.append(f"line {line_no}: {target}: an anchor into a non-markdown file")
                    continue
                if dest not in anchor_cache:
                    anchor_cache[dest] = anchors_of(dest)
                if anchor not in anchor_cache[dest]:
                    bad.append(f"line {line_no}: {target}: {rel(dest)} has no heading "
                               f"#{anchor}")
        res.check(not bad, f"links: {rel(path)} ({count} relative links)", "\n     ".join(bad))
    # The index links every page of the book.
    index = os.path.join(ROOT, "docs", "README.md")
    linked = {os.path.normpath(os.path.join(os.path.dirname(index), t.partition("#")[0]))
              for t, _ in links_of(read(index)) if not re.match(r"^[a-z]+:", t)}
    missing = [rel(p) for p in markdown_files()
               if os.path.dirname(p) != ROOT and p != index and p not in linked]
    res.check(not missing, "links: docs/README.md indexes every page of the book",
              "not linked from docs/README.md: " + ", ".join(missing))


def main(argv):
    checks = {"walkthrough": check_walkthrough, "blocks": check_blocks, "links": check_links}
    names = argv or list(checks)
    unknown = [n for n in names if n not in checks]
    if unknown:
        print(f"readme_walkthrough.py: unknown check {unknown[0]!r} "
              f"(known: {', '.join(checks)})", file=sys.stderr)
        return 2
    res = Results()
    for name in names:
        checks[name](res)
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
