"""The two executables and "pay for what you ask" (issue 11; docs/ARCHITECTURE.md, "Two
executables"), end to end on nvml-sim.

Checked: `gpuscope` needs none of SQLite, libmicrohttpd, GnuTLS, libyaml, libcrypt (readelf
NEEDED); `gpuscope --version` says what `gpuscope-full --version` says; `gpuscope agent
--help`, `gpuscope help` and `gpuscope run --help` reach gpuscope-full through the exec (same
exit status and text); a copy of `gpuscope` alone names the gpuscope-full it could not start
(exit 255); the NVML calls a one-shot command makes (nvml-sim's NVML_SIM_COUNT): a 7-field
query at most 10 per GPU and its values those of `--json`, the default text view at most 16.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, sim_env  # noqa: E402

t = Tap()
FULL = os.path.join(os.path.dirname(BIN), "gpuscope-full")
ENV = sim_env("h100x8-training.json", time=100, NO_COLOR="1",
              GPUSCOPE_HTTP_SOCKET="/nonexistent/agent.sock")


def run(cmd, env=ENV):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    return r.returncode, r.stdout, r.stderr


r = subprocess.run(["readelf", "-d", BIN], stdout=subprocess.PIPE, text=True)
needed = [ln.split("[")[1].rstrip("]") for ln in r.stdout.splitlines() if "(NEEDED)" in ln]
heavy = [n for n in needed if n.startswith(("libsqlite3", "libmicrohttpd", "libgnutls",
                                            "libyaml", "libcrypt", "libcurl"))]
t.ok(r.returncode == 0 and needed and not heavy,
     "gpuscope needs none of the agent's libraries", detail=needed)
t.eq(run([BIN, "--version"])[:2], run([FULL, "--version"])[:2],
     "gpuscope --version says what gpuscope-full says")
for args in (["agent", "--help"], ["help"], ["run", "--help"]):
    t.eq(run([BIN] + args), run([FULL] + args),
         "gpuscope %s: gpuscope-full's answer through the exec" % " ".join(args))

tmp = tempfile.mkdtemp(prefix="gs-startup.")
try:
    shutil.copy(BIN, tmp)
    rc, out, err = run([os.path.join(tmp, "gpuscope"), "agent", "--help"])
    t.ok(rc == 255 and "cannot start gpuscope-full" in err,
         "gpuscope alone: a clear error naming gpuscope-full, exit 255", detail="%d %s" % (rc, err))
finally:
    shutil.rmtree(tmp)


def calls(args):
    """NVML calls per GPU of one run of gpuscope ARGS, and its stdout."""
    with tempfile.NamedTemporaryFile(prefix="gs-count.") as f:
        rc, out, _ = run([BIN] + args, dict(ENV, NVML_SIM_COUNT=f.name))
        for line in open(f.name):
            w = line.split()
            if w[:2] == ["nvml_calls", "total"]:
                return int(w[2]) / max(int(w[4]), 1), out
    return None, out


FIELDS = "index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"
per, out = calls(["query", "--query-gpu=" + FIELDS, "--format=csv,noheader,nounits"])
t.ok(per is not None and per <= 10, "a 7-field query: at most 10 NVML calls per GPU",
     detail=per)
doc = json.loads(run([BIN, "--json"])[1])
want = ["%d, %s, %d, %d, %d, %d, %.2f" % (
    g["index"], g["name"], round(g["utilization_gpu"] * 100), -(-g["memory_used"] // 2**20),
    -(-g["memory_total"] // 2**20), round(g["temperature_gpu"]), g["power_draw"])
    for g in doc.get("gpus", [])] if doc.get("gpus") and "utilization_gpu" in doc["gpus"][0] \
    else None
if want is None:
    t.skip("the query's values are those of --json", "--json keys differ")
else:
    t.eq(out.strip().splitlines(), want, "the query's values are those of --json")
per, _ = calls([])
t.ok(per is not None and per <= 16, "the default text view: at most 16 NVML calls per GPU",
     detail=per)
sys.exit(t.done())
