"""A run directory no other user can steer (docs/run.md, FILES; issue 24 items 1 and 2), as root
with two unix users made here (useradd; removed at exit).

Checked: `gpuscope run --out` refuses a 0777 directory of planted links and a directory another
user owns (clear message, nothing written, the links' root-owned 0600 target unchanged); in a
directory of root's own, links planted at the names the run writes whole (stacks.svg,
stacks.txt, hang-1-stacks.txt, the hang dump's directory) are replaced or refused, never
followed (targets unchanged); `gpuscope trace capture --dir` refuses another user's directory;
and a process that drops privileges under a root `gpuscope run --stacks` and names a root-only
file as its code's source (compile(src, FILE, "exec")) gets no line of it into
metrics_report.json, while the same file made readable does (the check can fail); under sudo
the run's files go to SUDO_UID."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import BIN, SIM, TempUsers, clean_up_at_exit  # noqa: E402
from tap import Tap  # noqa: E402

PY = "/usr/bin/python3"
TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stacks_targets", "train_data.py")
t = Tap()
if os.geteuid() != 0:
    t.skip("a run directory no other user can steer", "not root")
    sys.exit(t.done())
for tool in ("useradd", "userdel", "setpriv"):
    if not shutil.which(tool):
        t.skip("a run directory no other user can steer", "%s not installed" % tool)
        sys.exit(t.done())

tag = os.getpid() % 1000000
A, B = "gsrda%d" % tag, "gsrdb%d" % tag
procs = []
tmp = tempfile.mkdtemp(prefix="gs-rundir.")
os.chmod(tmp, 0o755)
users = TempUsers([A, B])
clean_up_at_exit(procs, [tmp], users)
if users.add_user(A, "-s", "/usr/sbin/nologin") != 0 or users.add_user(B, "-s", "/usr/sbin/nologin") != 0:
    t.skip("a run directory no other user can steer", "useradd failed")
    sys.exit(t.done())
UID_A = int(subprocess.check_output(["id", "-u", A]).decode())
UID_B = int(subprocess.check_output(["id", "-u", B]).decode())

SECRET = os.path.join(tmp, "root-only")  # stands for /etc/shadow: root's, 0600
SECRET_TEXT = "".join("SECRETLINE-%d\n" % i for i in range(1, 16))
with open(SECRET, "w") as f:
    f.write(SECRET_TEXT)
os.chmod(SECRET, 0o600)
ENV = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NO_COLOR="1")
ENV.pop("NVML_SIM_SCENARIO", None)


def gsrun(out, cmd, extra=(), timeout=90):
    p = subprocess.run([BIN, "run", "--out", out] + list(extra) + ["--"] + cmd,
                       capture_output=True, text=True, env=ENV, timeout=timeout)
    return p


def plant(d, names):
    for n in names:
        os.symlink(SECRET, os.path.join(d, n))


def secret_kept():
    return open(SECRET).read() == SECRET_TEXT


# ---- a shared 0777 directory of planted links: refused, nothing written ----
shared = os.path.join(tmp, "shared")
os.mkdir(shared)
os.chmod(shared, 0o777)
planted = ["stacks.svg", "stacks.txt", "hang-1-stacks.txt", "hang.request.tmp", "x.tmp"]
plant(shared, planted)
p = gsrun(shared, ["true"], ["--stacks", "on"])
t.ok(p.returncode == 125 and "writable by every user (mode 0777)" in p.stderr and
     "chmod go-w" in p.stderr, "a 0777 directory: refused, the problem and the fix said",
     (p.returncode, p.stderr[-600:]))
t.ok(secret_kept() and sorted(os.listdir(shared)) == sorted(planted),
     "... no link followed, nothing written there", os.listdir(shared))

# ---- another user's directory (B's, 0755): refused for root's run ----
theirs = os.path.join(tmp, "theirs")
os.mkdir(theirs)
os.chown(theirs, UID_B, UID_B)
p = gsrun(theirs, ["true"])
t.ok(p.returncode == 125 and ("belongs to uid %d" % UID_B) in p.stderr and
     not os.listdir(theirs), "another user's directory: refused", p.stderr[-400:])
p = subprocess.run([BIN, "trace", "capture", "--dir", theirs, "--steps", "2"],
                   capture_output=True, text=True, env=ENV, timeout=30)
t.ok(p.returncode != 0 and "belongs to uid" in p.stderr and not os.listdir(theirs),
     "trace capture --dir: another user's directory refused", p.stderr[-400:])
link = os.path.join(tmp, "link-to-dir")
os.symlink(theirs, link)
p = gsrun(link, ["true"])
t.ok(p.returncode == 125 and "symbolic link" in p.stderr, "a link as --out: refused",
     p.stderr[-300:])

# ---- group write: the owner's private group (umask 002) only ----
GID_A = int(subprocess.check_output(["id", "-g", A]).decode())
GID_B = int(subprocess.check_output(["id", "-g", B]).decode())
res = []
for name, gid in (("upg", GID_A), ("grp-b", GID_B)):
    d = os.path.join(tmp, name)
    os.mkdir(d)
    os.chown(d, UID_A, gid)
    os.chmod(d, 0o775)
    q = subprocess.run(["setpriv", "--reuid", str(UID_A), "--regid", str(GID_A),
                        "--init-groups", BIN, "run", "--out", d, "--", "true"],
                       capture_output=True, text=True, env=ENV, timeout=60)
    res.append((q.returncode, q.stderr[-300:]))
t.ok(res[0][0] == 0 and res[1][0] == 125 and "writable by its group" in res[1][1],
     "group-writable: accepted for the owner's private group, refused for another's", res)

# ---- root's own directory with planted links: replaced or refused, never followed ----
own = os.path.join(tmp, "own")
os.mkdir(own)
elsewhere = os.path.join(tmp, "elsewhere")
os.mkdir(elsewhere)
plant(own, ["stacks.svg", "stacks.txt", "hang-1-stacks.txt"])
os.symlink(elsewhere, os.path.join(own, "hang-1-nccl"))
ENV["NVML_SIM_SCENARIO"] = ""
p = gsrun(own, [PY, TRAIN, "2", "hang", "5"], ["--interval", "0.2", "--hang-after", "3",
                                                "--hang-min", "1"])
kinds = {n: ("link" if os.path.islink(os.path.join(own, n)) else "file")
         for n in ("stacks.svg", "stacks.txt", "hang-1-stacks.txt")}
t.ok(p.returncode == 0 and secret_kept() and kinds == dict.fromkeys(kinds, "file") and
     "stuck_collective" in open(os.path.join(own, "hang-1-stacks.txt")).read(),
     "links at stacks.svg, stacks.txt, hang-1-stacks.txt: replaced by the run's files, the "
     "root-only target unchanged", (p.returncode, kinds, p.stderr[-800:]))
t.ok(os.listdir(elsewhere) == [] and os.path.islink(os.path.join(own, "hang-1-nccl")),
     "a link planted as the flight recorder's hang-1-nccl/: not written through",
     os.listdir(elsewhere))
t.ok(not [n for n in os.listdir(own) if ".tmp" in n], "no temporary left in the run directory",
     os.listdir(own))
own2 = os.path.join(tmp, "own2")
os.mkdir(own2)
os.symlink(SECRET, os.path.join(own2, "samples.db-wal"))
p = gsrun(own2, ["true"])
t.ok(p.returncode == 125 and "samples.db-wal" in p.stderr and secret_kept(),
     "a link named like one of SQLite's files: refused before anything opens it", p.stderr[-300:])

# ---- source lines: read with the traced process's rights ----
os.unlink(SECRET)  # afresh: a build that followed the links above overwrote it
with open(SECRET, "w") as f:
    f.write(SECRET_TEXT)
os.chmod(SECRET, 0o600)
script = os.path.join(tmp, "named.py")
with open(script, "w") as f:
    f.write("import time\n"
            "src = '\\n' * 7 + 'def hot():\\n    t = time.time()\\n'"
            " + '    while time.time() - t < 2.5:\\n        pass\\n' + 'hot()\\n'\n"
            "exec(compile(src, %r, 'exec'))\n" % SECRET)
os.chmod(script, 0o644)
ENV.pop("NVML_SIM_SCENARIO", None)


def dropped_run(name):
    out = os.path.join(tmp, name)
    p = gsrun(out, ["setpriv", "--reuid", str(UID_A), "--regid", str(UID_A), "--clear-groups",
                    PY, script], ["--no-auto", "--stacks", "50"])
    try:
        text = open(os.path.join(out, "metrics_report.json")).read()
    except OSError:
        text = ""
    top = (json.loads(text).get("stacks") or {}).get("top", []) if text else []
    return p, text, [x.get("file") for x in top]


p, text, files = dropped_run("drop1")
t.ok(p.returncode == 0 and SECRET in files and "SECRETLINE" not in text,
     "a uid-%d process naming a root-only file: no line of it in the report" % UID_A,
     (p.returncode, files, p.stderr[-600:]))
mode = oct(os.stat(os.path.join(tmp, "drop1", "metrics_report.json")).st_mode & 0o777)
os.chmod(SECRET, 0o644)
p, text, files = dropped_run("drop2")
t.ok(p.returncode == 0 and "SECRETLINE-" in text,
     "the same file readable by that uid: its line is in the report (the check can fail)",
     (files, p.stderr[-400:]))
t.eq(mode, "0o644", "the report of a root run: 0644 (its source lines are what the process "
     "could read)")

# ---- under sudo: what the run made goes to the user who ran sudo ----
ENV.update(SUDO_UID=str(UID_A), SUDO_GID=str(UID_A))
pre = os.path.join(tmp, "sudo-pre")  # root's own directory, given: its new files only
os.mkdir(pre)
for out in (os.path.join(tmp, "sudo", "run"), pre):
    p = gsrun(out, [PY, "-c", "import time; time.sleep(1)"], ["--no-auto"])
    owners = {n: os.stat(os.path.join(out, n)).st_uid for n in os.listdir(out)}
    t.ok(p.returncode == 0 and {"metrics_report.json", "steps.jsonl", "samples.db",
                                "stacks.svg", "stacks.txt"} <= set(owners) and
         set(owners.values()) == {UID_A} and
         os.stat(out).st_uid == (UID_A if out != pre else 0) and
         os.stat(os.path.dirname(out)).st_uid == 0,
         "sudo (SUDO_UID): the run's files are the user's%s" %
         (", the directory made for it too" if out != pre else "; a directory given stays root's"),
         (p.returncode, owners, p.stderr[-400:]))
for k in ("SUDO_UID", "SUDO_GID"):
    ENV.pop(k)

sys.exit(t.done())
