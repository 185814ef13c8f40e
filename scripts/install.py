#!/usr/bin/python3
"""`make install` and `make uninstall` (docs/install.md).

install BUILD --prefix P [--sysconfdir E] [--destdir D] [--nvidia-smi-link]
    Configures BUILD for prefix P, sysconfdir E (default /etc) and the nvidia-smi link option
    when they differ, builds it,
    runs `meson install` into D (DESTDIR staging, or the live system when empty), installs the
    agent's configuration only where none exists (an edited one is never overwritten), and
    writes a manifest, P/share/gpuscope/install-manifest: every file and link installed with
    its SHA-256, and every directory the install created.
uninstall --prefix P [--destdir D]
    Reads that manifest and removes exactly what it lists: files whose content is still what
    was installed (a file changed since, such as an edited agent.conf, is kept and named),
    links still pointing where they did, then the directories the install created, once empty.

Paths in the manifest are the installed ones (without DESTDIR), so a staged tree's manifest
is also the live one's after copying the tree to /.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

MANIFEST = "share/gpuscope/install-manifest"
HEADER = "# gpuscope install manifest: KIND SHA256|TARGET|- PATH (make uninstall reads it)"


def die(msg):
    print("gpuscope install: " + msg, file=sys.stderr)
    sys.exit(1)


def meson_json(build, what):
    out = subprocess.run(["meson", "introspect", "--" + what, build], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def staged(destdir, path):
    return os.path.join(destdir, path.lstrip("/")) if destdir else path


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def missing_dirs(destdir, paths):
    """The directories above these paths that do not exist yet, deepest first."""
    out = set()
    for p in paths:
        d = os.path.dirname(p)
        while d not in ("", "/") and not os.path.isdir(staged(destdir, d)):
            out.add(d)
            d = os.path.dirname(d)
    return sorted(out, key=lambda d: (-d.count("/"), d))


def install(a):
    build = a.build
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        die("%s is not a configured build directory (run make build first)" % build)
    prefix = os.path.abspath(a.prefix)
    opts = {o["name"]: o["value"] for o in meson_json(build, "buildoptions")}
    want = {"prefix": prefix, "sysconfdir": a.sysconfdir,
            "nvidia_smi_symlink": a.nvidia_smi_link}
    change = ["-D%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v)
              for k, v in want.items() if opts.get(k) != v]
    if change and a.no_build:
        die("%s is configured differently (%s) and --no-build was given" % (build, " ".join(change)))
    if change:
        print("install: meson configure %s %s" % (build, " ".join(change)))
        subprocess.run(["meson", "configure", build] + change, check=True)
        opts = {o["name"]: o["value"] for o in meson_json(build, "buildoptions")}
    if not a.no_build:
        subprocess.run(["ninja", "-C", build], check=True)

    destdir = os.path.abspath(a.destdir) if a.destdir else ""
    planned = list(meson_json(build, "installed").values())
    bindir = os.path.join(prefix, opts["bindir"])
    sysconfdir = os.path.join(prefix, opts["sysconfdir"])
    conf = os.path.join(sysconfdir, "gpuscope", "agent.conf")
    manifest = os.path.join(prefix, MANIFEST)
    planned += [conf, manifest]
    if a.nvidia_smi_link:
        planned.append(os.path.join(bindir, "nvidia-smi"))
    created = missing_dirs(destdir, planned)
    smi = os.path.join(bindir, "nvidia-smi")
    smi_before = os.path.lexists(staged(destdir, smi))

    env = dict(os.environ)
    env.pop("DESTDIR", None)
    cmd = ["meson", "install", "-C", build, "--no-rebuild"]
    if destdir:
        cmd += ["--destdir", destdir]
    subprocess.run(cmd, check=True, env=env)

    # What meson installed, from its own log (absolute paths, DESTDIR included; the directories
    # it made are listed too, and are in `created` when this install made them).
    log = os.path.join(build, "meson-logs", "install-log.txt")
    files = []
    with open(log) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if destdir:
                if line == destdir:
                    continue
                if not line.startswith(destdir + "/"):
                    die("install log names %s, outside %s" % (line, destdir))
                line = line[len(destdir):]
            if not os.path.isdir(staged(destdir, line)) or os.path.islink(staged(destdir, line)):
                files.append(line)
    # The install script's link (not in meson's log), when it made one.
    if a.nvidia_smi_link and not smi_before and os.path.islink(staged(destdir, smi)):
        files.append(smi)

    # The agent's configuration: installed where there is none; an existing one is the admin's.
    src_conf = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy",
                            "agent.conf")
    if os.path.lexists(staged(destdir, conf)):
        print("install: kept the existing %s (deploy/agent.conf has the defaults)" % conf)
    else:
        os.makedirs(os.path.dirname(staged(destdir, conf)), exist_ok=True)
        shutil.copyfile(src_conf, staged(destdir, conf))
        os.chmod(staged(destdir, conf), 0o644)
        print("Installing deploy/agent.conf to %s" % staged(destdir, conf))
        files.append(conf)

    # A reinstall over an earlier one: what that one installed and this one did not (its
    # agent.conf) and the directories it created stay in the manifest, so that uninstall still
    # removes them.
    earlier = read_manifest(staged(destdir, manifest), missing_ok=True)
    earlier_files = {e[2]: e for e in earlier if e[0] != "dir" and e[2] != manifest}
    created = sorted(set(created) | {e[2] for e in earlier if e[0] == "dir"},
                     key=lambda d: (-d.count("/"), d))

    os.makedirs(os.path.dirname(staged(destdir, manifest)), exist_ok=True)
    lines = [HEADER]
    for p in sorted(set(files) | (set(earlier_files) - set(files))):
        if p not in files:
            if os.path.lexists(staged(destdir, p)):
                lines.append(" ".join(earlier_files[p]))
            continue
        sp = staged(destdir, p)
        if os.path.islink(sp):
            lines.append("link %s %s" % (os.readlink(sp), p))
        elif os.path.isfile(sp):
            lines.append("file %s %s" % (sha256(sp), p))
        else:
            die("%s was logged as installed but is not there" % sp)
    for d in created:
        if os.path.isdir(staged(destdir, d)):
            lines.append("dir - %s" % d)
    lines.append("file - %s" % manifest)
    with open(staged(destdir, manifest), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("install: %d files; `make uninstall PREFIX=%s%s` removes them (%s)" %
          (len(lines) - 1, prefix, " DESTDIR=" + a.destdir if destdir else "", manifest))


def read_manifest(path, missing_ok=False):
    """The manifest's entries, [kind, sha256|target|-, path] each."""
    try:
        with open(path) as f:
            entries = [ln.rstrip("\n").split(" ", 2) for ln in f if not ln.startswith("#")]
    except FileNotFoundError:
        if missing_ok:
            return []
        raise
    for e in entries:
        if len(e) != 3 or e[0] not in ("file", "link", "dir"):
            die("%s: malformed line %r" % (path, " ".join(e)))
    return entries


def uninstall(a):
    prefix = os.path.abspath(a.prefix)
    destdir = os.path.abspath(a.destdir) if a.destdir else ""
    manifest = staged(destdir, os.path.join(prefix, MANIFEST))
    try:
        entries = read_manifest(manifest)
    except FileNotFoundError:
        die("no gpuscope installed under %s (%s not found)" % (prefix, manifest))
    kept = 0
    dirs = []
    for e in entries:
        kind, what, path = e
        sp = staged(destdir, path)
        if kind == "dir":
            dirs.append(sp)
            continue
        if not os.path.lexists(sp):
            continue
        if kind == "link":
            same = os.path.islink(sp) and os.readlink(sp) == what
        elif kind == "file":
            same = (not os.path.islink(sp) and os.path.isfile(sp) and
                    (what == "-" or sha256(sp) == what))
        else:
            same = False
        if not same:
            print("uninstall: kept %s: changed since it was installed" % sp)
            kept += 1
            continue
        os.unlink(sp)
    for d in sorted(dirs, key=lambda d: -d.count("/")):
        try:
            os.rmdir(d)
        except FileNotFoundError:
            pass
        except OSError:
            print("uninstall: kept %s: not empty" % d)
    print("uninstall: removed gpuscope from %s%s" % (manifest.rsplit("/" + MANIFEST, 1)[0],
                                                    " (%d changed files kept)" % kept if kept
                                                    else ""))


def main():
    ap = argparse.ArgumentParser(prog="scripts/install.py", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install", help="build and install")
    i.add_argument("build")
    i.add_argument("--prefix", default="/usr/local")
    i.add_argument("--sysconfdir", default="/etc")
    i.add_argument("--destdir", default="")
    i.add_argument("--nvidia-smi-link", action="store_true")
    i.add_argument("--no-build", action="store_true",
                   help="install BUILD as it is (the tests: no configure, no ninja)")
    u = sub.add_parser("uninstall", help="remove what install installed")
    u.add_argument("--prefix", default="/usr/local")
    u.add_argument("--destdir", default="")
    a = ap.parse_args()
    install(a) if a.cmd == "install" else uninstall(a)


if __name__ == "__main__":
    main()
