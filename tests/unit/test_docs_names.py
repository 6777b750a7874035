#!/usr/bin/env python3
"""test_docs_names: the docs say what is true now, not where it came from.

No file under docs/, nor CHANGELOG.md or README.md, names an internal issue ("issue 19",
"#19"), a stop ("stop 4"), a branch ("branch i40") or a commit (a word of 7 to 40 hex digits
with a digit and a letter), nor tells a history ("before this change"). A benchmark's dated
figures go to docs/perf/ as a table of date, figure and command; they name no commit either.

Usage: test_docs_names.py SOURCE_DIR. Prints each line that breaks a rule and exits 1."""
import os
import re
import sys

RULES = [
    ("an issue", re.compile(r"\bissues? ?#?[0-9]", re.I)),
    ("a stop", re.compile(r"\bstops? ?#?[0-9]", re.I)),
    ("an issue number", re.compile(r"(?<![\w&/])#[0-9]{2,}\b")),
    ("a commit", re.compile(r"(?<!reference )\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")),
    ("a branch", re.compile(r"\bbranch(es)? [a-z]*[0-9]", re.I)),
    ("a history", re.compile(r"\b(before|after) this change\b|\bused to be\b|\bthe last stop\b", re.I)),
]
TEXT = (".md", ".yml", ".yaml", ".conf", ".service", ".sql", ".sh", ".json", ".1", ".5", ".8")


def files(root):
    yield os.path.join(root, "CHANGELOG.md")
    yield os.path.join(root, "README.md")
    for d, _, names in os.walk(os.path.join(root, "docs")):
        for n in sorted(names):
            if n.endswith(TEXT):
                yield os.path.join(d, n)


def main():
    root = sys.argv[1]
    bad = 0
    for path in files(root):
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                for what, rule in RULES:
                    m = rule.search(line)
                    if m:
                        print(f"{os.path.relpath(path, root)}:{i}: names {what} "
                              f"({m.group(0)!r}): {line.strip()[:120]}")
                        bad += 1
    if bad:
        print(f"test_docs_names: {bad} line(s) name an issue, stop, branch or commit, or tell a history")
        return 1
    print("test_docs_names: no doc names an issue, stop, branch or commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
