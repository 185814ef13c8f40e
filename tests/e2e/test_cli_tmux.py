"""The CLI's full-screen views in a real terminal: tmux runs `gpuscope -i 1 -a` (the watch
view) and `gpuscope top` in detached sessions of 80x24 and 120x40 on nvml-sim scenarios, and
capture-pane reads what a user would see.

For each view and size:
- no GPU goes missing silently: every GPU of the 8-GPU scenario is on the screen, or the
  screen says that more follows (the watch view's "... N more lines", top's "GPUs 1-4 of 8");
- no column is cut: no line ends in the clip marker '>', every GPU line shown carries its
  memory figure (and every MIG line on the MIG scenario), and the watch view says when it
  is abbreviated;
- -f (part of -a) adds no made-up pid-0 line;
- through an agent, as a user who may not see the (simulated) processes of others, the watch
  view renders them as "N processes of other users, X" on their GPU's line and top shows no
  pid-0 row for them.

Each terminal is its own tmux server (-L, a name unique to this test process), killed at the
end, so parallel runs never meet.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import BIN, TempUsers, clean_up_at_exit, sim_env, start_agent, wait_until  # noqa: E402
from tap import Tap  # noqa: E402

t = Tap()
TMUX = shutil.which("tmux")
procs = []
tmp = tempfile.mkdtemp(prefix="gs-cli-tmux.")
os.chmod(tmp, 0o755)  # the viewer user must reach the agent's socket below it
servers = []
_n = [0]


class Term:
    """A command in a private tmux server (its own -L socket) of w x h cells."""

    def __init__(self, argv, env, w, h, prefix=()):
        _n[0] += 1
        self.sock = "gscli%d-%d" % (os.getpid(), _n[0])
        env = dict(env, TERM="screen-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8",
                   XDG_CONFIG_HOME=os.path.join(tmp, "cfg"))
        env.pop("TMUX", None)
        cmd = shlex.join(list(prefix) + list(argv)) + "; echo EXITED $?; sleep 600"
        subprocess.run([TMUX, "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-s", "t",
                        "-x", str(w), "-y", str(h), cmd], env=env, check=True)
        servers.append(self)

    def tmux(self, *a):
        return subprocess.run([TMUX, "-L", self.sock] + list(a), capture_output=True, text=True)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "t").stdout

    def wait(self, pattern, timeout=10.0):
        """The screen once pattern (a regex) is on it, else None."""
        rx = re.compile(pattern, re.M)
        return wait_until(lambda: (lambda s: s if rx.search(s) else None)(self.screen()), timeout)

    def close(self):
        self.tmux("kill-server")
        if self in servers:
            servers.remove(self)


def kill_servers():
    for s in list(servers):
        s.close()


def cut_lines(screen):
    """Lines that end in the clip marker (a line the terminal cut)."""
    return [ln for ln in screen.splitlines() if ln.rstrip().endswith(">")]


def pid0_lines(screen):
    """-f lines or table rows of a pid 0 (a made-up process)."""
    return [ln for ln in screen.splitlines()
            if re.match(r"^\s*[\u251c\u2514]\u2500\s+0 \(", ln) or re.match(r"^\s*\d+\s+0\s", ln)]


WATCH_GPU = re.compile(r"^\[(\d+)\] (.*)$", re.M)
WATCH_MEM = re.compile(r"\d+(?:\.\d)?[MG]/\d+(?:\.\d)?G|\d+ / \d+ MB")


def check_watch(screen, w, h, what, n_gpus=8):
    shown = [int(m.group(1)) for m in WATCH_GPU.finditer(screen)]
    more = re.search(r"^\.\.\. \d+ more lines?(?:, GPUs? (\d+)(?:-(\d+))?)?: "
                     r"the terminal is too short", screen, re.M)
    t.ok(shown and (sorted(shown) == list(range(n_gpus)) or
                    (more and shown == list(range(len(shown))))),
         "%s %dx%d: every GPU listed, or the screen says more follow" % (what, w, h),
         detail=screen)
    if more and sorted(shown) != list(range(n_gpus)):
        named = (list(range(int(more.group(1)), int(more.group(2) or more.group(1)) + 1))
                 if more.group(1) else [])
        t.eq(named, list(range(len(shown), n_gpus)),
             "%s %dx%d: the note names the GPUs that did not fit" % (what, w, h))
    t.ok(not cut_lines(screen), "%s %dx%d: no line cut at the edge" % (what, w, h),
         detail=cut_lines(screen) or screen)
    gpu_lines = [m.group(2) for m in WATCH_GPU.finditer(screen)]
    t.ok(gpu_lines and all(WATCH_MEM.search(ln) for ln in gpu_lines),
         "%s %dx%d: every GPU line carries its memory column" % (what, w, h), detail=screen)
    t.ok(not pid0_lines(screen), "%s %dx%d: no pid-0 line" % (what, w, h),
         detail=pid0_lines(screen))


TOP_GPU = re.compile(r"^\s?(\d+) H100", re.M)


def check_top(screen, w, h, what):
    shown = sorted({int(m.group(1)) for m in TOP_GPU.finditer(screen)})
    more = re.search(r"GPUs 1-(\d+) of 8", screen)
    t.ok(shown and (shown == list(range(8)) or
                    (more and shown == list(range(int(more.group(1)))))),
         "%s %dx%d: every GPU listed, or 'GPUs 1-N of 8' says more follow" % (what, w, h),
         detail=screen)
    t.ok(not cut_lines(screen), "%s %dx%d: no line cut at the edge" % (what, w, h),
         detail=screen)
    t.ok(all(re.search(r"MEM\[[^\]]*\d+[MG]/\d+G\]", ln) or "MEM[" not in ln
             for ln in screen.splitlines()) and "MEM[" in screen,
         "%s %dx%d: the memory meters carry used/total" % (what, w, h), detail=screen)
    t.ok(not pid0_lines(screen), "%s %dx%d: no pid-0 row" % (what, w, h),
         detail=pid0_lines(screen))


def main():
    if not os.path.exists(BIN):
        t.skip("CLI views in tmux", "no gpuscope binary at %s" % BIN)
        return t.done()
    if not TMUX:
        t.skip("CLI views in tmux", "tmux is not installed (scripts/deps.sh)")
        return t.done()
    clean_up_at_exit(procs, [tmp])
    try:
        direct(sim_env("h100x8-training.json", "30", GPUSCOPE_HTTP_SOCKET="off"))
        hidden()
    finally:
        kill_servers()
    return t.done()


def direct(env):
    # ---- the watch view, NVML direct ----
    for w, h in ((80, 24), (120, 40)):
        term = Term([BIN, "-i", "1", "-a"], env, w, h)
        s = term.wait(r"^\[0\] ")
        time.sleep(1.2)  # a second frame, redrawn in place
        s = term.screen()
        check_watch(s, w, h, "watch -a")
        t.ok(("abbreviated for %d columns" % w) in s,
             "watch -a %dx%d: the header says the view is abbreviated" % (w, h), detail=s)
        if w == 120:
            t.ok("... " not in s, "watch -a 120x40: all 8 GPUs fit, no 'more lines'", detail=s)
        term.tmux("resize-window", "-t", "t", "-x", "200", "-y", "60")
        s = term.wait(r"\d+ / \d+ MB", 5)
        t.ok(s is not None and "abbreviated" not in s,
             "watch -a %dx%d resized to 200x60: the full layout again" % (w, h),
             detail=term.screen())
        term.tmux("send-keys", "-t", "t", "C-c")
        t.ok(term.wait(r"EXITED 0", 5) is not None, "watch -a %dx%d: Ctrl-C ends it, status 0"
             % (w, h), detail=term.screen())
        term.close()
    # the plain watch (no -a) at 80 columns fits unabbreviated
    term = Term([BIN, "-i", "1"], env, 80, 24)
    s = term.wait(r"^\[7\] ")
    s = term.screen() if s else term.screen()
    check_watch(s, 80, 24, "watch")
    t.ok("abbreviated" not in s, "watch 80x24 without -a: nothing to abbreviate", detail=s)
    term.close()

    # MIG instances in the narrow layout: their memory under the GPU's, nothing cut
    mig_env = dict(env, NVML_SIM_SCENARIO=env["NVML_SIM_SCENARIO"].replace(
        "h100x8-training.json", "h100-mig.json"))
    term = Term([BIN, "-i", "1", "-a"], mig_env, 80, 24)
    s = term.wait(r"MIG \dg\.\d+gb")
    s = term.screen()
    check_watch(s, 80, 24, "watch -a MIG", n_gpus=1)
    migs = [ln for ln in s.splitlines() if re.search(r"MIG \dg\.\d+gb", ln)]
    t.ok(migs and all(WATCH_MEM.search(ln) for ln in migs),
         "watch -a MIG 80x24: every MIG line carries its memory", detail=s)
    term.close()

    # ---- gpuscope top, NVML direct ----
    for w, h in ((80, 24), (120, 40)):
        term = Term([BIN, "top", "--no-save"], env, w, h)
        s = term.wait(r"^\s?0 H100")
        time.sleep(1.2)
        s = term.screen()
        check_top(s, w, h, "top")
        term.tmux("send-keys", "-t", "t", "q")
        t.ok(term.wait(r"EXITED 0", 5) is not None, "top %dx%d: q quits, status 0" % (w, h),
             detail=term.screen())
        term.close()


def hidden():
    """Through an agent, as a user who sees only its own processes."""
    user = "gscli_view"
    if os.geteuid() != 0 or not all(shutil.which(x) for x in ("useradd", "userdel", "runuser")):
        t.skip("hidden processes in the watch view and top",
               "needs root, useradd and runuser (a second unix user)")
        return
    users = TempUsers([user])
    clean_up_at_exit(procs, [tmp], users)
    if users.add_user(user, "-N", "-s", "/bin/sh") != 0:
        t.skip("hidden processes in the watch view and top", "useradd failed")
        return
    sock = os.path.join(tmp, "run", "agent.sock")
    os.makedirs(os.path.dirname(sock), exist_ok=True)
    os.chmod(os.path.dirname(sock), 0o755)
    env = sim_env("h100x8-training.json", "30")
    p, _, ok = start_agent(["--data-dir", os.path.join(tmp, "data"), "--history", "off",
                            "--http-socket", sock, "--socket", "off"], env, procs,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t.ok(ok, "an agent on the 8-GPU scenario answers")
    if not ok:
        return
    as_user = ["runuser", "-u", user, "--", "env", "GPUSCOPE_HTTP_SOCKET=" + sock,
               "HOME=" + tmp]
    viewer_env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    viewer_env.pop("GPUSCOPE_NVML_LIBRARY", None)
    for w, h in ((80, 24), (120, 40)):
        term = Term([BIN, "-i", "1", "-a"], viewer_env, w, h, prefix=as_user)
        s = term.wait(r"of other users")
        s = term.screen()
        check_watch(s, w, h, "watch -a via the agent")
        hid = re.findall(r"\[(\d+) process(?:es)? of other users, (\d+(?:\.\d)?[MG]|memory N/A)\]",
                         s)
        t.ok(hid and all(n == "1" and m.endswith("G") for n, m in hid),
             "watch -a via the agent %dx%d: the hidden process of each GPU shown reads "
             "'1 process of other users, 60.4G'" % (w, h), detail=s)
        t.ok("hidden/0" not in s and "?(60" not in s and "1 hidden" not in s,
             "watch -a via the agent %dx%d: no 'N hidden/0' or '?(60.4G)' entries" % (w, h),
             detail=s)
        t.ok("via agent:" in s, "watch -a via the agent %dx%d: the header names the agent"
             % (w, h), detail=s)
        term.close()
    term = Term([BIN, "top", "--no-save"], viewer_env, 80, 24, prefix=as_user)
    s = term.wait(r"^\s?0 H100")
    time.sleep(1.2)
    s = term.screen()
    check_top(s, 80, 24, "top via the agent")
    term.close()


if __name__ == "__main__":
    sys.exit(main())
