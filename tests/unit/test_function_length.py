#!/usr/bin/env python3
"""test_function_length: no C function longer than 150 lines, unless it is a state machine
and the comment above it says so (its words "state machine"). A function is counted from
the line of its opening brace to its closing brace, both at the start of a line (the
kernel's style, .clang-format).

Usage: test_function_length.py SOURCE_DIR [--skip FOLDER ...]. Prints each function over
the bound and exits 1 when there is one."""
import os
import re
import sys

LIMIT = 150
SKIP_DIRS = {".git", "build", "data", "corpus", "node_modules"}


def functions(path):
    """(name, first line, lines) of each function of a C file."""
    lines = open(path, errors="replace").read().split("\n")
    start = None
    for i, line in enumerate(lines):
        if line == "{":
            start = i
        elif line.startswith("}") and start is not None:
            j = start - 1
            while j > 0 and not re.match(r"^[A-Za-z_].*\(", lines[j]):
                j -= 1
            name = re.search(r"(\w+)\s*\(", lines[j])
            k = j - 1
            while k >= 0 and lines[k].strip() and not lines[k].startswith("}"):
                k -= 1  # the comment and declarations above the definition
            above = "\n".join(lines[k + 1:j])
            yield (name.group(1) if name else "?", j + 1, i - start + 1, above)
            start = None


def main():
    root = sys.argv[1]
    skip = set(sys.argv[sys.argv.index("--skip") + 1:]) if "--skip" in sys.argv else set()
    found = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and os.path.join(rel, x).lstrip("./") not in skip)
        for f in sorted(files):
            if not f.endswith(".c"):
                continue
            path = os.path.join(d, f)
            for name, line, n, above in functions(path):
                if n > LIMIT and "state machine" not in above:
                    found.append(f"{os.path.relpath(path, root)}:{line}: {name} is {n} lines (at most {LIMIT}, "
                                 "or a state machine whose comment says so)")
    for f in found:
        print(f)
    if found:
        return 1
    print(f"test_function_length: no function over {LIMIT} lines"
          + (f" (not looked at: {', '.join(sorted(skip))})" if skip else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
