"""`make install` / `make uninstall` (scripts/install.py, docs/install.md) into a DESTDIR
staging tree, with the build's own prefix (so the build the other tests use is not
reconfigured), then the installed files run from the staging tree:

  gpuscope --version (the project's version), the quick check on nvml-sim, `gpuscope agent
  --help` (gpuscope-full found in ../libexec), `gpuscope top --help` (the module found
  relative to gpuscope), `gpuscope run` of an unmodified torch loop whose report counts the
  loop's own steps, with the staged package injected (not the build tree's);
  the .pth naming the package's directory, the systemd unit's ExecStart, agent.conf, the man
  pages (rendered by man);
  an edited agent.conf kept by a reinstall and by uninstall; uninstall removing everything
  else it installed and no file or directory it did not.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import BUILD, SCENARIOS, SIM, SRC, build_options, project_version  # noqa: E402
from tap import Tap  # noqa: E402

t = Tap()
SCRIPT = os.path.join(SRC, "scripts", "install.py")
opts = build_options()
PREFIX, SYSCONF = opts["prefix"], opts["sysconfdir"]
VERSION = project_version()
LOOP = textwrap.dedent("""
    import json, torch
    torch.set_num_threads(1)
    ds = torch.utils.data.TensorDataset(torch.randn(96, 8), torch.randn(96, 1))
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    for x, y in torch.utils.data.DataLoader(ds, batch_size=8):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad(); steps += 1
    import gpuscope
    print(json.dumps({"steps": steps, "package": gpuscope.__file__}))
""")


def install(stage, *extra):
    return subprocess.run([sys.executable, SCRIPT, "install", BUILD, "--no-build", "--prefix",
                           PREFIX, "--sysconfdir", SYSCONF, "--destdir", stage, *extra],
                          capture_output=True, text=True, timeout=120)


def uninstall(stage):
    return subprocess.run([sys.executable, SCRIPT, "uninstall", "--prefix", PREFIX,
                           "--destdir", stage], capture_output=True, text=True, timeout=60)


def tree(root):
    out = set()
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def s(path):
    return os.path.join(stage, path.lstrip("/"))


tmp = tempfile.mkdtemp(prefix="gs-install-")
try:
    stage = os.path.join(tmp, "stage")
    # Something of someone else's in a directory the install shares: it must survive.
    other = s(os.path.join(PREFIX, "share", "man", "man1", "other.1"))
    os.makedirs(os.path.dirname(other))
    open(other, "w").write(".TH OTHER 1\n")
    before = tree(stage)

    p = install(stage)
    t.ok(p.returncode == 0, "install into DESTDIR", detail=p.stdout[-2000:] + p.stderr[-2000:])
    bindir = s(os.path.join(PREFIX, opts["bindir"]))
    gs = os.path.join(bindir, "gpuscope")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUSCOPE_", "NVML_SIM", "PYTHON"))}
    env.update(NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    v = subprocess.run([gs, "--version"], capture_output=True, text=True, env=env)
    t.ok(v.returncode == 0 and VERSION in v.stdout, "staged gpuscope --version: " + VERSION,
         detail=v.stdout + v.stderr)
    sim = dict(env, GPUSCOPE_NVML_LIBRARY=SIM,
               NVML_SIM_SCENARIO=os.path.join(SCENARIOS, "h100x8-training.json"),
               GPUSCOPE_AGENT_SOCKET=os.path.join(tmp, "none.sock"))
    q = subprocess.run([gs, "--json"], capture_output=True, text=True, env=sim)
    try:
        gpus = len(json.loads(q.stdout)["gpus"])
    except (ValueError, KeyError):
        gpus = None
    t.eq(gpus, 8, "staged quick check reads the 8 simulated GPUs")
    a = subprocess.run([gs, "agent", "--help"], capture_output=True, text=True, env=env)
    t.ok(a.returncode == 0 and "gpuscope agent" in a.stdout,
         "staged `gpuscope agent --help` runs the staged gpuscope-full",
         detail=a.stdout[-500:] + a.stderr[-500:])
    tp = subprocess.run([gs, "top", "--help"], capture_output=True, text=True, env=env)
    t.ok(tp.returncode == 0 and "gpuscope top" in tp.stdout,
         "staged `gpuscope top --help` loads the staged module",
         detail=tp.stdout[-500:] + tp.stderr[-500:])

    loop = os.path.join(tmp, "loop.py")
    open(loop, "w").write(LOOP)
    out = os.path.join(tmp, "run")
    r = subprocess.run([gs, "run", "--out", out, "--", "/usr/bin/python3", loop],
                       capture_output=True, text=True, env=sim, timeout=180)
    try:
        measured = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        measured = {}
    try:
        rep = json.load(open(os.path.join(out, "metrics_report.json")))
    except (OSError, ValueError):
        rep = {}
    t.ok(r.returncode == 0 and measured.get("steps") == 12, "staged gpuscope run ran the loop",
         detail=r.stdout[-1500:] + r.stderr[-1500:])
    t.ok(str(measured.get("package", "")).startswith(stage + "/"),
         "gpuscope run injected the staged package", detail=measured.get("package"))
    t.eq(rep.get("steps"), measured.get("steps"), "the report counts the loop's own steps")

    site = subprocess.run(["/usr/bin/python3", os.path.join(SRC, "scripts", "python-site-dir.py"),
                           PREFIX], capture_output=True, text=True).stdout.strip()
    pydir = os.path.join(PREFIX, opts["libdir"], "gpuscope", "python")
    try:
        pth = open(s(os.path.join(site, "gpuscope.pth"))).read().strip()
    except OSError as e:
        pth = str(e)
    t.eq(pth, pydir, "gpuscope.pth in %s names the package's directory" % site)
    t.ok(os.path.isfile(s(os.path.join(pydir, "gpuscope", "__init__.py"))) and
         os.path.isfile(s(os.path.join(pydir, "gpuscope", "libgpuscope.so"))),
         "the package and its native library are installed in " + pydir)
    # The staged directory as the .pth would name it: `import gpuscope` through a site dir.
    imp = subprocess.run(["/usr/bin/python3", "-c", "import site, sys; site.addsitedir(sys.argv[1]);"
                          "import gpuscope; print(gpuscope.__version__, gpuscope.__file__)",
                          s(pydir)], capture_output=True, text=True, env=env)
    t.ok(imp.returncode == 0 and imp.stdout.startswith(VERSION + " " + s(pydir)),
         "import gpuscope from the installed directory", detail=imp.stdout + imp.stderr)

    unit = s(os.path.join(PREFIX, "lib", "systemd", "system", "gpuscope-agent.service"))
    try:
        exec_line = [ln for ln in open(unit) if ln.startswith("ExecStart=")]
    except OSError:
        exec_line = []
    t.eq(exec_line, ["ExecStart=%s agent --config %s\n" % (
        os.path.join(PREFIX, opts["bindir"], "gpuscope"),
        os.path.join(PREFIX, SYSCONF, "gpuscope", "agent.conf"))],
        "the unit runs the installed gpuscope with the installed agent.conf")
    conf = s(os.path.join(PREFIX, SYSCONF, "gpuscope", "agent.conf"))
    t.ok(os.path.isfile(conf) and open(conf).read() ==
         open(os.path.join(SRC, "deploy", "agent.conf")).read(), "agent.conf installed")
    man1 = s(os.path.join(PREFIX, opts["mandir"], "man1", "gpuscope-agent.1"))
    if shutil.which("pandoc") and shutil.which("man"):
        m = subprocess.run(["man", "-l", man1], capture_output=True, text=True,
                           env=dict(env, MANWIDTH="100", MAN_KEEP_FORMATTING="", PAGER="cat"))
        t.ok(m.returncode == 0 and "GPUSCOPE-AGENT(1)" in m.stdout and "SYNOPSIS" in m.stdout
             and "gpuscope agent --config FILE" not in m.stdout.split("SYNOPSIS")[0],
             "man renders gpuscope-agent(1)", detail=m.stdout[:600] + m.stderr[-600:])
        t.ok(os.path.isfile(s(os.path.join(PREFIX, opts["mandir"], "man7", "nvml-sim.7"))),
             "man pages in their sections (nvml-sim.7)")
    else:
        t.skip("man renders gpuscope-agent(1)", "pandoc or man not installed")
        t.skip("man pages in their sections", "pandoc or man not installed")

    # An edited agent.conf: a reinstall keeps it, uninstall keeps it and says so.
    with open(conf, "a") as f:
        f.write("interval = 2s\n")
    edited = open(conf).read()
    p2 = install(stage)
    t.ok(p2.returncode == 0 and open(conf).read() == edited and "kept the existing" in p2.stdout,
         "a reinstall keeps the edited agent.conf", detail=p2.stdout[-800:] + p2.stderr[-800:])
    u = uninstall(stage)
    t.ok(u.returncode == 0 and os.path.isfile(conf) and "kept " + conf in u.stdout,
         "uninstall keeps the edited agent.conf and names it",
         detail=u.stdout[-800:] + u.stderr[-800:])
    left = tree(stage) - before
    want = {os.path.relpath(p, stage) for p in (conf, os.path.dirname(conf))}
    want |= {os.path.relpath(d, stage) for d in [os.path.dirname(os.path.dirname(conf))]
             if d != stage}
    t.eq(sorted(left - want), [], "uninstall removed everything else it installed")
    t.ok(os.path.isfile(other), "uninstall left another package's file in a shared directory")
    os.unlink(conf)
    u2 = uninstall(stage)
    t.ok(u2.returncode != 0 and "no gpuscope installed" in u2.stderr,
         "uninstall again: a clear error", detail=u2.stdout + u2.stderr)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(t.done())
