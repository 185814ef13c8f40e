#!/usr/bin/env python3
"""The meson test 'format': every tracked *.c and *.h is as clang-format 14 writes it with the
repository's .clang-format (the tree was formatted once with it; a newer clang-format formats
some constructs differently, so another major version is a skip, as is none at all).

    check-format.py SOURCE_ROOT

TAP on stdout; each difference is printed as clang-format reports it, file:line:col.
"""
import os
import re
import shutil
import subprocess
import sys

WANT_MAJOR = 14
BATCH = 200


def find_clang_format():
    for name in ("clang-format-%d" % WANT_MAJOR, "clang-format"):
        path = shutil.which(name)
        if path:
            return path
    return None


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    root = argv[1]
    print("1..1")
    exe = find_clang_format()
    if not exe:
        print("ok 1 - format # SKIP clang-format not found (scripts/deps.sh installs it)")
        return 0
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.", version)
    if not m or int(m.group(1)) != WANT_MAJOR:
        print("ok 1 - format # SKIP %s is not clang-format %d: %s"
              % (exe, WANT_MAJOR, version.strip()))
        return 0
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "*.c", "*.h"],
                             check=True, capture_output=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as e:
        print("ok 1 - format # SKIP not a git checkout (%s)" % e)
        return 0
    files = sorted(f for f in out.split("\0") if f)
    problems = []
    for i in range(0, len(files), BATCH):
        r = subprocess.run([exe, "--dry-run", "-Werror", "--style=file"] + files[i:i + BATCH],
                           cwd=root, capture_output=True, text=True)
        if r.returncode != 0:
            problems += [ln for ln in r.stderr.splitlines() if re.match(r"^\S+:\d+:\d+: ", ln)]
            if not problems:
                problems.append(r.stderr.strip() or "clang-format failed (%d)" % r.returncode)
    if problems:
        bad = sorted({p.split(":")[0] for p in problems})
        print("not ok 1 - format: %d file(s) differ from clang-format -i (%s)"
              % (len(bad), os.path.basename(exe)))
        for p in problems:
            print("# " + p)
        sys.stderr.write("\n".join(problems) + "\n")
        return 1
    print("ok 1 - format: %d C files as clang-format %d writes them" % (len(files), WANT_MAJOR))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
