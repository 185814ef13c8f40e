#!/usr/bin/env python3
"""Checks the rules of docs/ARCHITECTURE.md ("Layers") that the compiler does not.

    check-layers.py SOURCE_ROOT          the meson test 'layers' (TAP)
    check-layers.py --table              prints the Markdown table the document carries

Rules, over the tracked C files of src/ and include/gpuscope/:
  layers    a file of src/X includes a header of src/Y only when LAYERS lets X use Y
            (its own folder and include/gpuscope/ always);
  table     docs/ARCHITECTURE.md carries the table below, as --table prints it;
  cli       no header of src/cli/ is included outside src/cli/;
  public    a header of include/gpuscope/ includes only system and gpuscope/ headers;
  sqlite    `sqlite3_` and <sqlite3.h> only in src/store/ (only the store knows the tables);
  proc      a string literal starting with "/proc" only in src/backend/procfs.c, the files of
            PROC_ALLOWED and the literals of PROC_LITERALS_ALLOWED.
Every violation is printed as file:line: rule: what, after a TAP "not ok" line.
"""
import os
import re
import subprocess
import sys

# Lowest first: a folder may include the folders of lower ranks, never one of its own rank or
# above (peers do not know each other). core may use backend's public headers (the sampler
# drives backend.h and procfs.h); backend knows only base and the public model.
LAYERS = [
    ["base"],
    ["backend"],
    ["core"],
    ["store", "stacks", "trace", "diag"],
    ["run"],
    ["client"],
    ["runview", "agent"],
    ["top", "cli"],
]

# Files of src/ that may name a /proc path besides src/backend/procfs.c, and why.
PROC_ALLOWED = {
    # The interpreter's own address space through /proc/self/mem when a seccomp filter refuses
    # process_vm_readv: a memory device opened for reading bytes, not a procfs text.
    "src/stacks/mem.c": "reads memory through /proc/self/mem, no procfs text",
    # pyfind.c maps a live process's interpreter: /proc/PID/maps, its ELF files through
    # /proc/PID/root (the process's mount namespace) and, for the permission diagnosis,
    # /proc/self/status (CapEff) and the Yama ptrace_scope. They belong to the ELF search
    # (libelf, only the stacks reader links it), not to the sampler's process details.
    "src/stacks/pyfind.c": "the interpreter's maps, ELF files and ptrace diagnosis",
    # The visibility policy's fallback for a loopback TCP peer's uid (sock_diag first):
    # /proc/net/tcp{,6} are the host's socket tables, not a process's files.
    "src/agent/policy.c": "the socket tables /proc/net/tcp{,6}",
}


# /proc paths any file may name, and why.
PROC_LITERALS_ALLOWED = {
    # readlink of the running executable's own path (gpuscope-full beside gpuscope, the top
    # module, the Python package, demo's re-exec): a link, no procfs text is read.
    '"/proc/self/exe"': "the running executable's own path",
}


def rank_of():
    r = {}
    for i, row in enumerate(LAYERS):
        for f in row:
            r[f] = i
    return r


def may_use(folder):
    """The folders a file of src/folder may include (its own aside)."""
    r = rank_of()
    return sorted((f for f, i in r.items() if i < r[folder]), key=lambda f: (r[f], f))


def table():
    lines = ["| layer | folders | may include, besides their own folder and `include/gpuscope/` |",
             "|---|---|---|"]
    for i, row in enumerate(LAYERS):
        use = ", ".join("`%s`" % u for u in may_use(row[0])) or "nothing else"
        lines.append("| %d | %s | %s |" % (i, ", ".join("`src/%s/`" % f for f in row), use))
    return "\n".join(lines)


def strip_comments(text):
    """text with comments blanked (newlines kept, so line numbers stay); strings kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def tracked(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "src", "include"],
                             check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):  # a source tarball: walk the tree
        files = []
        for top in ("src", "include"):
            for d, _, names in os.walk(os.path.join(root, top)):
                files += [os.path.relpath(os.path.join(d, x), root) for x in names]
    return sorted(f for f in files if f.endswith((".c", ".h")))


def check_file(root, path, errors):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = strip_comments(f.read())
    parts = path.split("/")
    folder = parts[1] if parts[0] == "src" and len(parts) > 2 else None
    allowed = set(may_use(folder)) | {folder} if folder in rank_of() else None

    def bad(ln, rule, what):
        errors.append("%s:%d: %s: %s" % (path, ln, rule, what))

    for ln, line in enumerate(text.split("\n"), 1):
        m = INCLUDE.match(line)
        if m:
            kind, name = m.groups()
            top = name.split("/")[0] if "/" in name else None
            if path.startswith("include/gpuscope/"):
                if kind == '"' and top != "gpuscope":
                    bad(ln, "public", "include/gpuscope/ includes \"%s\" (only gpuscope/ and "
                        "system headers)" % name)
            elif kind == '"' and top == "cli" and folder != "cli":
                bad(ln, "cli", "a src/cli/ header outside src/cli/: \"%s\"" % name)
            elif kind == '"' and folder and top and top != "gpuscope":
                if allowed is None:
                    bad(ln, "layers", "src/%s/ is not in the LAYERS table" % folder)
                elif top not in rank_of():
                    bad(ln, "layers", "\"%s\": src/%s/ is not in the LAYERS table" % (name, top))
                elif top not in allowed:
                    bad(ln, "layers", "src/%s/ may not include src/%s/ (\"%s\"; it may use %s)"
                        % (folder, top, name, ", ".join(sorted(allowed - {folder})) or "nothing"))
            if kind == "<" and name == "sqlite3.h" and not path.startswith("src/store/"):
                bad(ln, "sqlite", "<sqlite3.h> outside src/store/")
            continue
        if not path.startswith("src/store/"):
            code = STRING.sub('""', line)
            if re.search(r"\bsqlite3_", code):
                bad(ln, "sqlite", "SQLite called outside src/store/ (the store's read APIs)")
        if path != "src/backend/procfs.c" and path not in PROC_ALLOWED:
            for s in STRING.findall(line):
                if s.startswith('"/proc') and s not in PROC_LITERALS_ALLOWED:
                    bad(ln, "proc", "%s: /proc is read in src/backend/procfs.c" % s)


def main(argv):
    if len(argv) == 2 and argv[1] == "--table":
        print(table())
        return 0
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    root = argv[1]
    errors = []
    files = tracked(root)
    for path in files:
        check_file(root, path, errors)
    for path in PROC_ALLOWED:
        if path not in files:
            errors.append("%s:1: proc: on PROC_ALLOWED but not in the tree" % path)
    doc = os.path.join(root, "docs", "ARCHITECTURE.md")
    with open(doc, encoding="utf-8") as f:
        if table() not in f.read():
            errors.append("docs/ARCHITECTURE.md:1: table: the Layers table differs from "
                          "scripts/check-layers.py's LAYERS (print it with --table)")
    print("1..1")
    if errors:
        print("not ok 1 - layers: %d violation(s)" % len(errors))
        for e in errors:
            print("# " + e)
        sys.stderr.write("\n".join(errors) + "\n")
        return 1
    print("ok 1 - layers: %d files follow docs/ARCHITECTURE.md's rules" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
