"""The wheel (pyproject.toml, meson-python; docs/install.md "pip"): built from this source
tree with pip, installed into a fresh venv (--system-site-packages, for Debian's torch), then
run from that venv:

  the wheel's version is the project's, as are `gpuscope --version` and gpuscope.__version__;
  `import gpuscope` loads the wheel's package with its native library; the `gpuscope` console
  script starts the wheel's executables (`gpuscope agent --help`: gpuscope-full, `gpuscope top
  --help`: the top module); `gpuscope run` of an unmodified torch loop injects the wheel's
  package and its report counts the loop's own steps.

The wheel's meson build directory is <build>/wheel, kept between runs, so only the first run
compiles the whole project (about a minute on two cores; later runs take seconds). Skipped
where meson-python is not installed (Debian python3-mesonpy, scripts/deps.sh), and in a
sanitizer build (the wheel is built with meson-python's own options, not the build's).
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
PY = "/usr/bin/python3"
TESTS = ["wheel built", "the wheel's version", "installed into a fresh venv",
         "gpuscope --version", "import gpuscope", "native library", "agent --help", "top --help",
         "gpuscope run", "injected package", "report steps"]


def skip_all(why):
    for d in TESTS:
        t.skip(d, why)
    sys.exit(t.done())


if subprocess.run([PY, "-c", "import mesonpy, venv"], capture_output=True).returncode != 0:
    skip_all("meson-python not installed (python3-mesonpy)")
opts = build_options()
if opts.get("b_sanitize", "none") != "none":
    skip_all("sanitizer build: the wheel is built with meson-python's own options")
VERSION = project_version()
LOOP = textwrap.dedent("""
    import json, sys, torch
    torch.set_num_threads(1)
    ds = torch.utils.data.TensorDataset(torch.randn(96, 8), torch.randn(96, 1))
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    for x, y in torch.utils.data.DataLoader(ds, batch_size=8):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad(); steps += 1
    # not imported here: the package gpuscope run injected, if it did
    pkg = getattr(sys.modules.get("gpuscope"), "__file__", None)
    print(json.dumps({"steps": steps, "package": pkg}))
""")
# No user or site pip configuration (find-links, indexes, caches) in the build or the install.
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("GPUSCOPE_", "NVML_SIM", "PYTHON", "PIP_", "VIRTUAL_ENV"))}
env.update(NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
           PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")

tmp = tempfile.mkdtemp(prefix="gs-wheel-")
try:
    dist = os.path.join(tmp, "dist")
    wbuild = os.path.join(BUILD, "wheel")
    b = None
    # meson-python 0.12 reconfigures a given build directory even when it holds no build yet
    # (meson then fails); a first run sets it up with pyproject.toml's options.
    if not os.path.isfile(os.path.join(wbuild, "build.ninja")):
        shutil.rmtree(wbuild, ignore_errors=True)
        b = subprocess.run(["meson", "setup", wbuild, SRC, "-Dpython_wheel=true", "-Dtests=false",
                            "-Dman=disabled", "-Dsystemd_unit_dir="], capture_output=True,
                           text=True, env=env, timeout=300)
    else:
        # ... and reads the install plan before its build regenerates a build directory whose
        # meson.build files changed: regenerated first, the plan names today's files.
        b = subprocess.run(["ninja", "-C", wbuild, "build.ninja"], capture_output=True, text=True,
                           env=env, timeout=300)
    if b is None or b.returncode == 0:
        b = subprocess.run([PY, "-m", "pip", "wheel", SRC, "--no-build-isolation", "--no-index",
                        "--no-deps", "--no-cache-dir", "-w", dist,
                        "--config-settings", "builddir=" + wbuild,
                        # two compile jobs: it runs beside the other tests
                        "--config-settings", "compile-args=-j2"],
                       capture_output=True, text=True, env=env, timeout=600)
    wheels = [n for n in os.listdir(dist) if n.endswith(".whl")] if os.path.isdir(dist) else []
    t.ok(b.returncode == 0 and len(wheels) == 1, "wheel built: %s" % wheels,
         detail=b.stdout[-3000:] + b.stderr[-3000:])
    if not wheels:
        for d in TESTS[1:]:
            t.skip(d, "no wheel")
        sys.exit(t.done())
    whl = os.path.join(dist, wheels[0])
    t.ok(wheels[0].startswith("gpuscope-%s-" % VERSION), "the wheel's version is " + VERSION,
         detail=wheels[0])

    venv = os.path.join(tmp, "venv")
    vbin = os.path.join(venv, "bin")
    i = subprocess.run([PY, "-m", "venv", "--system-site-packages", venv], capture_output=True,
                       text=True, env=env, timeout=120)
    if i.returncode == 0:
        i = subprocess.run([os.path.join(vbin, "python"), "-m", "pip", "install", "--no-index",
                            "--no-deps", "--no-cache-dir", whl], capture_output=True, text=True,
                           env=env, timeout=120)
    t.ok(i.returncode == 0 and os.access(os.path.join(vbin, "gpuscope"), os.X_OK),
         "installed into a fresh venv, gpuscope on its PATH",
         detail=i.stdout[-1500:] + i.stderr[-1500:])
    venv_env = dict(env, VIRTUAL_ENV=venv, PATH=vbin + os.pathsep + env.get("PATH", ""))
    site = subprocess.run([os.path.join(vbin, "python"), "-c",
                           "import sysconfig; print(sysconfig.get_path('platlib'))"],
                          capture_output=True, text=True, env=venv_env).stdout.strip()
    bundle = os.path.join(site, "gpuscope.bundle")

    v = subprocess.run(["gpuscope", "--version"], capture_output=True, text=True, env=venv_env)
    t.eq(v.stdout.strip(), "gpuscope " + VERSION, "gpuscope --version from the venv's PATH")
    imp = subprocess.run(["python", "-c", "import gpuscope, gpuscope._native as n; "
                          "print(gpuscope.__version__); print(gpuscope.__file__); "
                          "lib = n.load(); print(lib._name if lib else n.load_error())"],
                         capture_output=True, text=True, env=venv_env, cwd=tmp)
    lines = imp.stdout.split("\n")
    t.ok(imp.returncode == 0 and lines[0] == VERSION and lines[1].startswith(bundle + "/"),
         "import gpuscope in the venv: the wheel's package, __version__ " + VERSION,
         detail=imp.stdout + imp.stderr)
    lib = os.path.join(bundle, "python", "gpuscope", "libgpuscope.so")
    t.ok(len(lines) > 2 and lines[2] == lib,
         "native library loaded from the wheel", detail=imp.stdout + imp.stderr)
    a = subprocess.run(["gpuscope", "agent", "--help"], capture_output=True, text=True,
                       env=venv_env)
    t.ok(a.returncode == 0 and "gpuscope agent" in a.stdout,
         "gpuscope agent --help runs the wheel's gpuscope-full",
         detail=a.stdout[-500:] + a.stderr[-500:])
    tp = subprocess.run(["gpuscope", "top", "--help"], capture_output=True, text=True,
                        env=venv_env)
    t.ok(tp.returncode == 0 and "gpuscope top" in tp.stdout,
         "gpuscope top --help loads the wheel's top module",
         detail=tp.stdout[-500:] + tp.stderr[-500:])

    loop = os.path.join(tmp, "loop.py")
    open(loop, "w").write(LOOP)
    out = os.path.join(tmp, "run")
    sim = dict(venv_env, GPUSCOPE_NVML_LIBRARY=SIM,
               NVML_SIM_SCENARIO=os.path.join(SCENARIOS, "h100x8-training.json"),
               GPUSCOPE_AGENT_SOCKET=os.path.join(tmp, "none.sock"))
    # The loop runs under Debian's python, outside the venv: only the injection finds gpuscope.
    r = subprocess.run(["gpuscope", "run", "--out", out, "--", PY, loop], capture_output=True,
                       text=True, env=sim, timeout=180, cwd=tmp)
    try:
        measured = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        measured = {}
    try:
        rep = json.load(open(os.path.join(out, "metrics_report.json")))
    except (OSError, ValueError):
        rep = {}
    t.ok(r.returncode == 0 and measured.get("steps") == 12, "gpuscope run ran the loop",
         detail=r.stdout[-1500:] + r.stderr[-1500:])
    t.ok(str(measured.get("package")).startswith(bundle + "/python/gpuscope/"),
         "gpuscope run injected the wheel's package", detail=measured.get("package"))
    t.eq(rep.get("steps"), measured.get("steps"), "the report counts the loop's own steps")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(t.done())
