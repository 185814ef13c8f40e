"""The Debian package (make deb, debian/; docs/install.md "DEBIAN PACKAGE") and the image built
from it (deploy/kubernetes/Dockerfile, "IMAGE"):

  `make deb` builds gpuscope_<version>_<arch>.deb and lintian finds no error and no warning
  (overrides: debian/gpuscope.lintian-overrides); the control file (version from meson.build,
  Depends holding the package of every library the ELF files need, as dpkg-shlibdeps computes
  it), the conffile, the unit, the sysusers entry, man pages gzipped and whatis-readable, ELF
  files stripped with no RPATH, the machine-readable copyright, changelog.Debian.gz;
  the package extracted with dpkg-deb -x runs from there: --version, the quick check on
  nvml-sim, gpuscope-full's commands, the top module, `gpuscope run` injecting the extracted
  Python package, the agent with the shipped agent.conf serving /metrics;
  the maintainer scripts pass shellcheck; installed with `dpkg --root` into a throwaway root
  (scripts run chrootless with DPKG_ROOT, in a mount namespace where the host's /etc, /var,
  /usr are read-only, so a script that reached past DPKG_ROOT would fail, not change the
  host): the gpuscope system user made, the unit enabled and not started; remove keeps the
  edited conffile and the history; purge takes both, the unit's enablement, and keeps the user;
  the image: its runtime stage installs this .deb, and the DaemonSet's image, command, port and
  mounts match the installed layout.

The package's meson build directory is <build>/deb, kept between runs like the wheel's: the
first run compiles the whole project (a minute or two on two cores), later ones take seconds.
Skipped without debhelper, lintian or the build dependencies (dpkg-checkbuilddeps), and in a
sanitizer build. The throwaway-root checks need root and unshare (else skipped).
"""
import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import (BUILD, SRC, build_options, free_port, project_version, sim_env,  # noqa: E402
                   stop_agent, wait_healthy)
from tap import Tap  # noqa: E402

t = Tap()
TESTS = ["deb built", "lintian: no errors", "lintian: no warnings", "control fields",
         "Depends from the ELF files' libraries", "conffile", "--version", "quick check",
         "gpuscope-full's commands", "gpuscope run", "agent with the shipped agent.conf",
         "unit", "sysusers", "man pages", "stripped, no RPATH", "copyright", "changelog",
         "python .pth", "shellcheck", "maintainer scripts", "root: install", "root: user",
         "root: enabled", "root: upgrade", "root: host untouched", "root: remove", "root: purge",
         "image",
         "manifest"]


def skip_all(why):
    for d in TESTS:
        t.skip(d, why)
    sys.exit(t.done())


missing = [p for p in ("dh", "lintian", "dpkg-deb", "dpkg-checkbuilddeps", "readelf")
           if not shutil.which(p)]
if missing:
    skip_all("not installed: %s (make deps)" % " ".join(missing))
opts = build_options()
if opts.get("b_sanitize", "none") != "none":
    skip_all("sanitizer build: the package is built with Debian's flags, not the build's")
cb = subprocess.run(["dpkg-checkbuilddeps"], cwd=SRC, capture_output=True, text=True)
if cb.returncode != 0:
    skip_all("build dependencies missing: " + cb.stderr.strip().splitlines()[-1])

VERSION = project_version()
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                      text=True).stdout.strip()
MULTIARCH = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                           text=True).stdout.strip()
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("GPUSCOPE_", "NVML_SIM", "PYTHON", "DEB_", "DH_", "MAKEFLAGS",
                            "MFLAGS"))}
# two compile jobs: it runs beside the other tests
env.update(NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1", DEB_BUILD_OPTIONS="parallel=2")

tmp = tempfile.mkdtemp(prefix="gs-deb-")
try:
    dist = os.path.join(tmp, "dist")
    b = subprocess.run(["make", "-C", SRC, "--no-print-directory", "deb",
                        "DEB_BUILD=" + os.path.join(BUILD, "deb"), "DEB_OUT=" + dist],
                       capture_output=True, text=True, env=env, timeout=1200)
    out = b.stdout + b.stderr
    debs = sorted(os.path.basename(p) for p in glob.glob(os.path.join(dist, "gpuscope_*.deb")))
    name_re = r"gpuscope_%s-\d+_%s\.deb" % (re.escape(VERSION), re.escape(ARCH))
    t.ok(len(debs) == 1 and re.fullmatch(name_re, debs[0]),
         "deb built: %s (gpuscope_%s-N_%s.deb)" % (debs, VERSION, ARCH), detail=out[-4000:])
    if len(debs) != 1:
        for d in TESTS[1:]:
            t.skip(d, "no package")
        sys.exit(t.done())
    deb = os.path.join(dist, debs[0])
    hints = re.findall(r"^([EW]): gpuscope[^:]*: (.*)$", out, re.M)
    errors = [h for k, h in hints if k == "E"]
    warnings = [h for k, h in hints if k == "W"]
    lint_ran = "lintian --fail-on error,warning" in out
    t.ok(lint_ran and not errors, "lintian: no errors", detail="\n".join(errors) or out[-2000:])
    t.ok(lint_ran and not warnings and b.returncode == 0,
         "lintian: no warnings (overrides in debian/gpuscope.lintian-overrides); make deb exit 0",
         detail="\n".join(warnings) or out[-2000:])

    def field(name):
        return subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True,
                              text=True).stdout.strip()

    ctl = {f: field(f) for f in ("Package", "Version", "Architecture", "Maintainer", "Section",
                                 "Priority", "Homepage", "Description", "Depends")}
    t.ok(ctl["Package"] == "gpuscope" and ctl["Version"].split("-")[0] == VERSION and
         ctl["Architecture"] == ARCH and all(ctl[f] for f in ("Maintainer", "Section",
                                                               "Priority", "Homepage")) and
         len(ctl["Description"].splitlines()) > 3,
         "control fields: Version %s (meson.build's), Maintainer, Section, Priority, Homepage, "
         "Description" % ctl["Version"], detail=ctl)

    x = os.path.join(tmp, "x")
    subprocess.run(["dpkg-deb", "-x", deb, x], check=True)
    elves = []
    for d, _, files in os.walk(x):
        for n in files:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                if not os.path.islink(p) and f.read(4) == b"\x7fELF":
                    elves.append(p)
    # Every NEEDED library of every ELF file: the package that holds it here must be in Depends.
    depends = {re.split(r"[\s(]", alt.strip())[0] for dep in ctl["Depends"].split(",")
               for alt in dep.split("|")}
    need_pkgs, unresolved = {}, []
    for e in elves:
        dyn = subprocess.run(["readelf", "-d", e], capture_output=True, text=True).stdout
        for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dyn):
            # dpkg knows a library by the path its package ships (/lib or /usr/lib: merged /usr)
            owner = ""
            for d in ("/usr/lib/" + MULTIARCH, "/lib/" + MULTIARCH, "/usr/lib64", "/lib64"):
                if os.path.exists(os.path.join(d, lib)):
                    owner = subprocess.run(["dpkg", "-S", os.path.join(d, lib)],
                                           capture_output=True, text=True).stdout.split(":")[0]
                    if owner:
                        break
            if not owner:
                unresolved.append(lib)
            need_pkgs[lib] = owner
    lacking = sorted("%s (%s)" % (lib, p) for lib, p in need_pkgs.items() if p not in depends)
    t.ok(len(elves) == 4 and need_pkgs and not lacking and not unresolved and
         "libjansson4" in depends,
         "Depends from the ELF files' libraries: %d libraries of %d ELF files, each one's "
         "package in Depends" % (len(need_pkgs), len(elves)),
         detail={"lacking": lacking, "unresolved": unresolved, "Depends": ctl["Depends"],
                 "elves": elves})

    ctrl = os.path.join(tmp, "control")
    subprocess.run(["dpkg-deb", "-e", deb, ctrl], check=True)
    conffiles = open(os.path.join(ctrl, "conffiles")).read().split()
    conf = os.path.join(x, "etc", "gpuscope", "agent.conf")
    t.ok(conffiles == ["/etc/gpuscope/agent.conf"] and
         open(conf).read() == open(os.path.join(SRC, "deploy", "agent.conf")).read(),
         "conffile: /etc/gpuscope/agent.conf, deploy/agent.conf as it is", detail=conffiles)

    gs = os.path.join(x, "usr", "bin", "gpuscope")
    run_env = {k: v for k, v in env.items() if not k.startswith("DEB_")}
    v = subprocess.run([gs, "--version"], capture_output=True, text=True, env=run_env)
    t.eq(v.stdout.strip(), "gpuscope " + VERSION, "extracted gpuscope --version")
    sim = sim_env("h100x8-training.json", **{k: v for k, v in run_env.items()
                                              if k in ("NO_COLOR", "PYTHONDONTWRITEBYTECODE")})
    q = subprocess.run([gs, "--json"], capture_output=True, text=True, env=sim)
    try:
        gpus = len(json.loads(q.stdout)["gpus"])
    except (ValueError, KeyError):
        gpus = None
    t.eq(gpus, 8, "quick check from the extracted tree reads the 8 simulated GPUs")
    cmds = {}
    for c in ("agent", "top", "runs", "report", "compare", "stacks", "trace"):
        r = subprocess.run([gs, c, "--help"], capture_output=True, text=True, env=run_env)
        cmds[c] = (r.returncode, ("gpuscope " + c) in r.stdout, r.stderr[-300:])
    t.ok(all(rc == 0 and named for rc, named, _ in cmds.values()),
         "gpuscope-full's commands --help from the extracted tree (top: its module)",
         detail=cmds)
    pkgdir = os.path.join(x, "usr", "lib", MULTIARCH, "gpuscope", "python")
    rdir = os.path.join(tmp, "run")
    r = subprocess.run([gs, "run", "--out", rdir, "--", "/usr/bin/python3", "-c",
                        "import gpuscope; print(gpuscope.__file__)"],
                       capture_output=True, text=True, env=sim, timeout=120)
    lines = r.stdout.strip().splitlines()
    t.ok(r.returncode == 0 and lines and lines[-1].startswith(pkgdir + "/gpuscope/") and
         os.path.isfile(os.path.join(rdir, "metrics_report.json")),
         "gpuscope run injects the extracted package and writes the report",
         detail=r.stdout[-1500:] + r.stderr[-1500:])

    # The agent with the conffile as shipped, on a free port and a private data directory.
    port = free_port()
    data = os.path.join(tmp, "data")
    a = subprocess.Popen([gs, "agent", "--config", conf, "--listen", "127.0.0.1:%d" % port,
                          "--data-dir", data], env=sim, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    base = "http://127.0.0.1:%d" % port
    healthy = wait_healthy(base, a)
    metrics = ""
    if healthy:
        import urllib.request
        with urllib.request.urlopen(base + "/metrics", timeout=5) as resp:
            metrics = resp.read().decode()
    seen = set(re.findall(r'^gpuscope_gpu_temperature_celsius\{[^}]*gpu="(\d+)"', metrics, re.M))
    rc, aerr = stop_agent(a)
    t.ok(healthy and len(seen) == 8 and rc == 0 and
         os.path.isfile(os.path.join(data, "history.db")),
         "agent from the extracted tree with the shipped agent.conf: /metrics of 8 GPUs, "
         "history.db, exit 0 on SIGTERM", detail={"gpus": sorted(seen), "rc": rc,
                                                  "stderr": aerr[-1500:]})

    unit = open(os.path.join(x, "usr", "lib", "systemd", "system",
                             "gpuscope-agent.service")).read()
    want = ["ExecStart=/usr/bin/gpuscope agent --config /etc/gpuscope/agent.conf",
            "User=gpuscope", "DynamicUser=yes", "StateDirectory=gpuscope",
            "RuntimeDirectory=gpuscope", "WantedBy=multi-user.target"]
    t.ok(all(("\n" + w + "\n") in unit for w in want),
         "unit in /usr/lib/systemd/system: the installed gpuscope, User=gpuscope",
         detail=[w for w in want if ("\n" + w + "\n") not in unit])
    sysusers = os.path.join(x, "usr", "lib", "sysusers.d", "gpuscope.conf")
    t.ok(os.path.isfile(sysusers) and
         re.search(r"^u gpuscope ", open(sysusers).read(), re.M) is not None,
         "sysusers: /usr/lib/sysusers.d/gpuscope.conf declares the system user gpuscope")

    man = os.path.join(x, "usr", "share", "man")
    pages = [os.path.join(d, n) for d, _, fs in os.walk(man) for n in fs]
    want_pages = len(re.findall(r"^\s*'[\w.-]+\.md' : \[", open(
        os.path.join(SRC, "docs", "meson.build")).read(), re.M))
    bad = [p for p in pages if not p.endswith(".gz")]
    whatis = [subprocess.run(["lexgrog", p], capture_output=True, text=True)
              for p in pages] if shutil.which("lexgrog") else []
    unparsed = [w.stdout.strip() for w in whatis if w.returncode != 0]
    rendered = subprocess.run(["man", "-l", os.path.join(man, "man1", "gpuscope-agent.1.gz")],
                              capture_output=True, text=True,
                              env=dict(run_env, MANWIDTH="100", PAGER="cat")) \
        if shutil.which("man") else None
    t.ok(len(pages) == want_pages and not bad and not unparsed and
         (rendered is None or "GPUSCOPE-AGENT(1)" in rendered.stdout),
         "man pages: %d gzipped (docs/meson.build lists %d), each NAME read by lexgrog" %
         (len(pages), want_pages), detail={"uncompressed": bad, "lexgrog": unparsed})

    unstripped, rpath = [], []
    for e in elves:
        if ".symtab" in subprocess.run(["readelf", "-S", e], capture_output=True,
                                       text=True).stdout:
            unstripped.append(e)
        if re.search(r"\((RPATH|RUNPATH)\)", subprocess.run(["readelf", "-d", e],
                                                            capture_output=True,
                                                            text=True).stdout):
            rpath.append(e)
    t.ok(elves and not unstripped and not rpath,
         "ELF files stripped (no .symtab), no RPATH/RUNPATH",
         detail={"unstripped": unstripped, "rpath": rpath})

    doc = os.path.join(x, "usr", "share", "doc", "gpuscope")
    cright = open(os.path.join(doc, "copyright")).read()
    t.ok(cright.startswith("Format: https://www.debian.org/doc/packaging-manuals/"
                           "copyright-format/1.0/\n") and "\nLicense: Expat\n" in cright,
         "copyright: machine-readable (DEP-5)")
    try:
        first = gzip.open(os.path.join(doc, "changelog.Debian.gz"), "rt").readline()
    except OSError as e:
        first = str(e)
    t.ok(first.startswith("gpuscope (%s)" % ctl["Version"]),
         "changelog.Debian.gz: its first entry is this version", detail=first)
    try:
        pth = open(os.path.join(x, "usr", "lib", "python3", "dist-packages",
                                "gpuscope.pth")).read().strip()
    except OSError as e:
        pth = str(e)
    local = [p for p in pages + elves if "/usr/local/" in p] + \
        glob.glob(os.path.join(x, "usr", "local")) + \
        glob.glob(os.path.join(x, "usr", "share", "gpuscope", "install-manifest"))
    t.ok(pth == "/usr/lib/%s/gpuscope/python" % MULTIARCH and not local,
         "python: /usr/lib/python3/dist-packages/gpuscope.pth names the package's directory; "
         "nothing in /usr/local, no make-uninstall manifest", detail={"pth": pth,
                                                                      "local": local})

    scripts = sorted(n for n in ("preinst", "postinst", "prerm", "postrm")
                     if os.path.isfile(os.path.join(ctrl, n)))
    if shutil.which("shellcheck"):
        sc = subprocess.run(["shellcheck", "-s", "sh"] + [os.path.join(ctrl, n) for n in scripts],
                            capture_output=True, text=True)
        t.ok(sc.returncode == 0, "shellcheck passes the maintainer scripts %s" % scripts,
             detail=sc.stdout[-2000:])
    else:
        t.skip("shellcheck", "shellcheck not installed")
    text = {n: open(os.path.join(ctrl, n)).read() for n in scripts}
    post, prerm = text.get("postinst", ""), text.get("prerm", "")
    t.ok("systemd-sysusers ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} gpuscope.conf" in post and
         "deb-systemd-helper enable 'gpuscope-agent.service'" in post and
         "deb-systemd-invoke start" not in post and
         "deb-systemd-invoke try-restart 'gpuscope-agent.service'" in post and
         re.search(r'"\$1" = remove.*\n.*deb-systemd-invoke stop gpuscope-agent.service',
                   prerm) is not None,
         "maintainer scripts: user by systemd-sysusers, unit enabled and not started, "
         "restarted on upgrade only if running, stopped on remove", detail=text)

    # Installed into a throwaway root: dpkg --root, scripts chrootless (DPKG_ROOT), inside a
    # mount namespace where the host's directories are read-only.
    root = os.path.join(tmp, "root")

    def host_state():
        """What the package's scripts would change on the host: a gpuscope user or group, the
        unit's enablement, deb-systemd-helper's state of it, dpkg's record of the package.
        (Other tests add users and agents meanwhile: only gpuscope's own traces count.)"""
        h = {}
        for p in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"):
            try:
                h[p] = [ln for ln in open(p) if ln.startswith("gpuscope:")]
            except OSError:
                h[p] = None
        for d in ("/etc/systemd/system", "/var/lib/systemd/deb-systemd-helper-enabled"):
            h[d] = sorted(os.path.join(a_, n) for a_, ds, fs in os.walk(d) for n in ds + fs
                          if "gpuscope" in n)
        h["dpkg"] = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", "gpuscope"],
                                   capture_output=True, text=True).stdout
        return h

    ro = "for d in /etc /var /usr /root /home /opt /srv; do [ -d $d ] || continue; " \
         "mount --bind $d $d && mount -o remount,bind,ro $d || exit 97; done; exec \"$@\""

    def dpkg(*args):
        return subprocess.run(["unshare", "-m", "sh", "-c", ro, "sh", "dpkg", "--root=" + root,
                               "--force-depends", "--force-script-chrootless",
                               "--log=/dev/null"] + list(args),
                              capture_output=True, text=True, env=run_env, timeout=120)

    can_root = os.geteuid() == 0 and shutil.which("unshare") and shutil.which("systemd-sysusers")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", ro, "sh", "true"],
                           capture_output=True) if can_root else None
    if probe is None or probe.returncode != 0:
        why = "needs root, unshare and systemd-sysusers" if probe is None else \
            "unshare -m with read-only binds refused here"
        for d in TESTS[TESTS.index("root: install"):TESTS.index("image")]:
            t.skip(d, why)
    else:
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"):
            os.makedirs(os.path.join(root, d))
        for n in ("status", "available"):
            open(os.path.join(root, "var", "lib", "dpkg", n), "w").close()
        open(os.path.join(root, "etc", "passwd"), "w").write("root:x:0:0:root:/root:/bin/sh\n")
        open(os.path.join(root, "etc", "group"), "w").write("root:x:0:\n")
        before = host_state()

        def r_(p):
            return os.path.join(root, p.lstrip("/"))

        i = dpkg("-i", deb)
        t.ok(i.returncode == 0 and os.access(r_("/usr/bin/gpuscope"), os.X_OK) and
             os.path.isfile(r_("/etc/gpuscope/agent.conf")),
             "root: dpkg -i installs it, its maintainer scripts run",
             detail=i.stdout[-1500:] + i.stderr[-1500:])
        users = {ln.split(":")[0]: ln.split(":") for ln in open(r_("/etc/passwd"))}
        u = users.get("gpuscope", [])
        t.ok(len(u) == 7 and 0 < int(u[2]) < 1000 and u[6].strip().endswith("nologin"),
             "root: the system user gpuscope (uid %s, no login shell)" % (u[2] if u else "-"),
             detail=users)
        wants = r_("/etc/systemd/system/multi-user.target.wants/gpuscope-agent.service")
        t.ok(os.path.islink(wants) and os.readlink(wants) ==
             "/usr/lib/systemd/system/gpuscope-agent.service" and
             "deb-systemd-invoke start" not in i.stdout + i.stderr,
             "root: the unit enabled (multi-user.target.wants), not started",
             detail=os.readlink(wants) if os.path.islink(wants) else "no link")
        # What the agent would leave: history under the unit's StateDirectory (DynamicUser: the
        # private directory behind a link); an admin's edit of the conffile.
        os.makedirs(r_("/var/lib/private/gpuscope"))
        open(r_("/var/lib/private/gpuscope/history.db"), "w").write("x")
        os.symlink("private/gpuscope", r_("/var/lib/gpuscope"))
        with open(r_("/etc/gpuscope/agent.conf"), "a") as f:
            f.write("interval = 2\n")
        # The same package again: dpkg's upgrade path (preinst upgrade, postinst configure
        # with the old version), the edited conffile kept without a question.
        up = dpkg("-i", deb)
        t.ok(up.returncode == 0 and
             open(r_("/etc/gpuscope/agent.conf")).read().endswith("interval = 2\n") and
             os.path.islink(wants) and "Configuration file" not in up.stdout,
             "root: reinstalled over itself (upgrade path): the edited conffile kept, "
             "still enabled", detail=up.stdout[-1500:] + up.stderr[-1500:])
        rm = dpkg("--remove", "gpuscope")
        t.ok(rm.returncode == 0 and not os.path.exists(r_("/usr/bin/gpuscope")) and
             open(r_("/etc/gpuscope/agent.conf")).read().endswith("interval = 2\n") and
             os.path.isfile(r_("/var/lib/gpuscope/history.db")),
             "root: remove takes the programs, keeps the edited conffile and the history",
             detail=rm.stdout[-1500:] + rm.stderr[-1500:])
        pg = dpkg("--purge", "gpuscope")
        left = sorted(os.path.relpath(os.path.join(a_, n), root)
                      for a_, ds, fs in os.walk(root) for n in fs
                      if not os.path.join(a_, n).startswith(r_("/var/lib/dpkg")))
        left = [p for p in left if not re.match(r"etc/(passwd|group|shadow|gshadow)-?$|"
                                                r"etc/\.pwd\.lock$", p)]
        t.ok(pg.returncode == 0 and not left and not os.path.lexists(r_("/etc/gpuscope")) and
             not os.path.lexists(r_("/var/lib/gpuscope")) and
             "gpuscope:" in open(r_("/etc/passwd")).read(),
             "root: purge takes the conffile, the history, the unit's enablement; keeps the "
             "user", detail={"left": left, "out": pg.stdout[-1000:] + pg.stderr[-1000:]})
        after = host_state()
        t.ok(before == after, "root: the host untouched (no gpuscope user, unit link or dpkg "
         "record made there)",
             detail={k: (before[k], after[k]) for k in before if before[k] != after[k]})

    # The image (no container engine runs here): its runtime stage installs this package, and
    # the DaemonSet runs what the package installs where the package puts it.
    df = open(os.path.join(SRC, "deploy", "kubernetes", "Dockerfile")).read()
    stages = re.split(r"^FROM ", df, flags=re.M)[1:]
    runtime = stages[-1] if stages else ""
    entry = re.search(r'^ENTRYPOINT \["([^"]+)"\]', runtime, re.M)
    cmd = re.search(r"^CMD (\[.*\])", runtime, re.M)
    expose = re.search(r"^EXPOSE (\d+)", runtime, re.M)
    t.ok(len(stages) == 2 and "make deb " in stages[0] and
         runtime.startswith("debian:bookworm-slim") and
         re.search(r"apt-get install [^\n]*\\\n\s+/tmp/dist/gpuscope_\*\.deb", runtime) and
         "gcc" not in runtime and entry and os.access(os.path.join(x, entry.group(1).lstrip("/")),
                                                       os.X_OK) and
         cmd and json.loads(cmd.group(1))[2] == "/etc/gpuscope/agent.conf",
         "image: built by make deb, its bookworm-slim stage installs the .deb; ENTRYPOINT "
         "and CMD name the installed gpuscope and conffile", detail=runtime)
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml:
        kdocs = list(yaml.safe_load_all(open(os.path.join(SRC, "deploy", "kubernetes",
                                                          "gpuscope-agent.yaml"))))
        ds = next(d for d in kdocs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
        ctr = ds["containers"][0]
        mounts = {m["name"]: m["mountPath"] for m in ctr["volumeMounts"]}
        args = ctr["args"]
        conf_arg = args[args.index("--config") + 1] if "--config" in args else ""
        data_arg = args[args.index("--data-dir") + 1] if "--data-dir" in args else ""
        checks = {
            "image gpuscope:" + VERSION: ctr["image"].rsplit("/", 1)[-1] == "gpuscope:" + VERSION,
            "no command (the image's ENTRYPOINT)": "command" not in ctr,
            "--config in the ConfigMap's mount": conf_arg == os.path.join(mounts.get(
                "config", "?"), "agent.conf") == "/etc/gpuscope/agent.conf",
            "--data-dir a mounted volume": data_arg == mounts.get("data") == "/var/lib/gpuscope",
            "/run/gpuscope mounted (sockets)": mounts.get("run") == "/run/gpuscope",
            "containerPort is EXPOSE": bool(expose) and
            ctr["ports"][0]["containerPort"] == int(expose.group(1)),
            "read-only root": ctr["securityContext"].get("readOnlyRootFilesystem") is True,
        }
        t.ok(all(checks.values()), "manifest: image, command, config, data and socket "
             "mounts, port match the image and the package's layout",
             detail={k: v for k, v in checks.items() if not v})
    else:
        t.skip("manifest", "python3-yaml not installed")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(t.done())
