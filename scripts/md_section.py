#!/usr/bin/env python3
"""Put a generated section into a markdown file between <!-- NAME --> and
<!-- /NAME --> (appended when the markers are missing), so each benchmark
script rewrites its own part of docs/BENCHMARKS.md and leaves the rest.

usage: md_section.py NAME [FILE] < SECTION   (FILE: docs/BENCHMARKS.md)
"""
import sys


def put(md_path, name, body):
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    section = f"{start}\n{body.rstrip()}\n{end}\n"
    try:
        text = open(md_path).read()
    except FileNotFoundError:
        text = ""
    a, b = text.find(start), text.find(end)
    if a >= 0 and b > a:
        text = text[:a] + section + text[b + len(end) + 1:]
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + section
    open(md_path, "w").write(text)
    print(f"wrote the {name} section of {md_path}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[-2].strip())
    put(sys.argv[2] if len(sys.argv) == 3 else "docs/BENCHMARKS.md", sys.argv[1], sys.stdin.read())
