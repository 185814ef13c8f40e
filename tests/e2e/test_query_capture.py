"""`gpuscope query` against real nvidia-smi output, byte for byte.

Each case replays one section of a real capture (shared/reference/nvidia-smi-captures, copied
into tests/e2e/scenarios/capture-<board>-<state>.expected: the nvidia-smi command line, then its
exact output): a scenario file (capture-<board>-<state>.json) holds that machine's values, nvml-sim
serves them with the virtual clock frozen (NVML_SIM_TIME), and gpuscope runs with the capture's
exact --query-gpu / --query-compute-apps field list. The whole output must equal the capture's
bytes with two kinds of substitution only:

- the timestamp column: the time of our sample (its format is checked);
- the fields listed in NOT_IN_MODEL, which gpuscope's model does not carry yet: there we demand
  the exact token a driver that cannot answer prints (`[N/A]`, bare `N/A` for fabric.*), and the
  number of such cells is reported per case. Nothing else is masked.
"""
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN  # noqa: E402

SIM = os.path.join(BUILD, "sim", "libnvidia-ml.so.1")
SCEN = os.path.join(SRC, "tests", "e2e", "scenarios")

# capture -> virtual time: the RTX 2080 SUPER and L40S scenarios accumulate clock-event time
# through throttle events, which needs a later instant than the others
CASES = {"h100-idle": 100, "h100-load": 100, "h100-mig-idle": 100, "h100-mig-load": 100,
         "rtx4080s-idle": 100, "rtx4080s-load": 100, "rtx2080s-idle": 1000,
         "rtx2080s-load": 1000, "l40s-idle": 1000, "l40s-load": 1000}

TIMESTAMP = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}$")

# Fields nvidia-smi answers that gpuscope's model (include/gpuscope/gs_model.h) does not carry,
# with the NVML call that would fill them. We print what a driver that cannot answer prints;
# the captures show real values. Each becomes exact once the model, backend and nvml-sim carry it.
NOT_IN_MODEL = {
    "pcie.link.gen.hostmax": "nvmlDeviceGetPcieLinkMaxSpeed / host max generation",
    "platform.chassis_serial_number": "nvmlDeviceGetPlatformInfo",
    "platform.slot_number": "nvmlDeviceGetPlatformInfo",
    "platform.tray_index": "nvmlDeviceGetPlatformInfo",
    "platform.host_id": "nvmlDeviceGetPlatformInfo",
    "platform.peer_type": "nvmlDeviceGetPlatformInfo",
    "platform.gpu_fabric_guid": "nvmlDeviceGetPlatformInfo",
}


def fallback(field):
    """What gpuscope prints for a field it does not carry."""
    return "N/A" if field.startswith("fabric.") else "[N/A]"


def load_expected(name):
    """[(argv after 'nvidia-smi', [output lines])] from a .expected file."""
    blocks = []
    with open(os.path.join(SCEN, "capture-%s.expected" % name), encoding="utf-8") as fh:
        for line in fh.read().splitlines():
            if line.startswith("# nvidia-smi "):
                blocks.append((line[len("# nvidia-smi "):].split(" "), []))
            elif line:
                blocks[-1][1].append(line)
    return blocks


def fields_of(argv):
    for a in argv:
        if a.startswith("--query-gpu=") or a.startswith("--query-compute-apps="):
            return a.split("=", 1)[1].split(",")
    raise ValueError(argv)


def want_output(argv, lines, got_lines, notes):
    """The capture's bytes with our timestamps and the NOT_IN_MODEL tokens put in."""
    fields = fields_of(argv)
    out = [lines[0]]
    for i, row in enumerate(lines[1:]):
        cells = row.split(", ")
        ours = got_lines[i + 1].split(", ") if i + 1 < len(got_lines) else []
        if len(cells) != len(fields):
            raise ValueError("capture row has %d cells for %d fields" % (len(cells), len(fields)))
        for k, f in enumerate(fields):
            if f == "timestamp" and k < len(ours):
                notes.setdefault("timestamps", []).append(ours[k])
                cells[k] = ours[k]
            elif f in NOT_IN_MODEL and cells[k] != fallback(f):
                notes.setdefault("not_in_model", []).append("%s=%s" % (f, cells[k]))
                cells[k] = fallback(f)
        out.append(", ".join(cells))
    return "".join(line + "\n" for line in out)


def run(name, argv):
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM,
               NVML_SIM_SCENARIO=os.path.join(SCEN, "capture-%s.json" % name),
               NVML_SIM_TIME=str(CASES[name]), TZ="UTC")
    return subprocess.run([BIN, "query"] + argv, env=env, capture_output=True, text=True,
                          timeout=60)


def main():
    t = Tap()
    if not os.path.exists(SIM):
        t.skip("capture replay", "nvml-sim not built (%s)" % SIM)
        return t.done()
    for name in CASES:
        for argv, lines in load_expected(name):
            what = "%s %s" % (name, argv[0].split("=")[0])
            r = run(name, argv)
            t.eq(r.returncode, 0, "%s: exit status 0 (stderr: %s)" % (what, r.stderr.strip()))
            got = r.stdout
            notes = {}
            want = want_output(argv, lines, got.splitlines(), notes)
            t.eq(got, want, "%s: output equals the capture byte for byte" % what)
            stamps = notes.get("timestamps", [])
            t.ok(all(TIMESTAMP.match(s) for s in stamps),
                 "%s: %d timestamp cells in YYYY/MM/DD HH:MM:SS.mmm" % (what, len(stamps)),
                 detail=stamps)
            diff = notes.get("not_in_model", [])
            print("# %s: %d cells differ only because the model lacks the field: %s"
                  % (what, len(diff), ", ".join(diff) if diff else "none"), flush=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
