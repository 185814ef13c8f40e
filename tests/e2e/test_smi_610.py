"""Driver 610's nvidia-smi layouts against a real 610.57.04 capture (tests/e2e/smi_610, see its
README): `--version` byte for byte, the table's header line, and `-q`'s header lines byte for
byte and every row label in order (values are not compared: the capture was taken on another
day than the 595 capture whose scenario is replayed here with the driver set to 610.57.04 and
CUDA 13.3). The same scenario at 595.71.05 keeps 595's layout.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN  # noqa: E402

SIM = os.path.join(BUILD, "sim", "libnvidia-ml.so.1")
CAPTURE = os.path.join(SRC, "tests", "e2e", "smi_610", "capture-rtx2080s-610.57.04-idle.smi")
SCENARIO = os.path.join(SRC, "tests", "e2e", "scenarios", "capture-rtx2080s-idle.json")
Q_LINE = re.compile(r"^( *)(.*?) *: (.*)$")


def blocks():
    out, cur = {}, None
    with open(CAPTURE, encoding="utf-8") as fh:
        for line in fh.read().split("\n")[:-1]:
            if line.startswith("# $ nvidia-smi"):
                cur = line[len("# $ nvidia-smi"):].strip()
                out[cur] = []
            elif cur is not None:
                out[cur].append(line)
    return {k: "".join(x + "\n" for x in v) for k, v in out.items()}


def labels(text):
    """-q's row labels with their indentation, values dropped."""
    out = []
    for line in text.split("\n"):
        m = Q_LINE.match(line)
        out.append(m.group(1) + m.group(2) if m else line.rstrip())
    return out


def run(argv, tmp, driver="610.57.04", cuda="13.3"):
    with open(SCENARIO, encoding="utf-8") as fh:
        scen = json.load(fh)
    scen["driver_version"], scen["cuda_driver_version"] = driver, cuda
    path = os.path.join(tmp, "scenario-%s.json" % driver)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=path,
               NVML_SIM_TIME="1000", TZ="UTC")
    return subprocess.run([BIN, "query"] + argv, env=env, capture_output=True, text=True,
                          timeout=60)


def main():
    t = Tap()
    want = blocks()
    with tempfile.TemporaryDirectory(prefix="gs-smi-610-") as tmp:
        r = run(["--version"], tmp)
        t.eq(r.stdout, want["--version"], "610 --version: DRIVER/CUDA version deprecated, "
             "KMD version and CUDA UMD version, byte for byte")
        r = run([], tmp)
        t.eq(r.stdout.split("\n")[1:5], want[""].split("\n")[1:5],
             "610 table: the KMD Version / CUDA UMD Version header, byte for byte")
        r = run(["-q"], tmp)
        got, exp = r.stdout.split("\n"), want["-q"].split("\n")
        t.eq(got[5:11], exp[5:11], "610 -q: Driver / CUDA Version marked deprecated, KMD Version "
             "and CUDA UMD Version, byte for byte")
        t.eq(labels(r.stdout), labels(want["-q"]),
             "610 -q: every row label in order (Inforom Time Data, GPU Current T.Limit Temp, "
             "GPU Target Temperature Specification, GPU Ceiling Power Limit, GPU Base Power)")
        old = run(["-q"], tmp, driver="595.71.05", cuda="13.2").stdout
        t.ok("KMD Version" not in old and "GPU Ceiling Power Limit" not in old
             and "    GPU Target Temperature  " in old, "595 -q keeps 595's layout")
        x = run(["-q", "-x"], tmp).stdout
        t.ok(x.split("\n")[1] == '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">'
             and "<driver_version>610.57.04</driver_version>" in x,
             "610 -q -x: the v13 document with driver_version")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
