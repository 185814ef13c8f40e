"""A run survives an agent restart (docs/agent.md, RESUMING A RUN): an unmodified PyTorch loop
(real torch, CPU; it never imports gpuscope) under the auto sitecustomize sends its steps to the
agent's step socket; the agent is stopped and started again under it, and the package's sender
reconnects and resumes the same run.

To see the run's state between the restart and the resume, the training is stopped (SIGSTOP)
while the agent restarts: the new agent lists the run `interrupted` with the steps stored before
the stop; once the training goes on (SIGCONT) the same run is `running` again, and at its end
`ended` with at least 95 % of the steps the script counted itself, one run of that name (same
id), its report's records_dropped (what the sender could not pass on) said, and its
train_tokens the script's own tokens per step for every step kept (the steps stored before a
restart keep their tokens: history schema v6). A second
restart leaves the training going on for a second without an agent: its steps wait in the
package's queue and reach the same run. Under `gpuscope run` (the package's receiver is
`gpuscope run`, the agent gets a copy on a second connection) the agent's copy is resumed too,
and the steps it missed while away are counted in its records_dropped.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYROOT, PYTHON, Tap  # noqa: E402
from gsenv import BIN, clean_up, get_json, sim_env, start_agent, stop_agent, wait_until  # noqa: E402

t = Tap()
tmp = tempfile.mkdtemp(prefix="gs-resume.")
os.chmod(tmp, 0o755)
procs = []
SOCK = os.path.join(tmp, "steps.sock")
DATA = os.path.join(tmp, "data")
COUNT = os.path.join(tmp, "count.json")
NAME = "resume-me"
STEPS = 250

# No gpuscope import: the auto sitecustomize times the loop (one step per optimizer step).
TRAIN = textwrap.dedent("""
    import json, sys, time
    import torch
    torch.set_num_threads(1)
    m = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    done = tokens = 0
    for i in range(int(sys.argv[1])):
        ids = torch.randint(0, 100, (16, 8))  # batch x sequence: token ids
        loss = m(ids).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        done += 1
        tokens += ids.numel()
        time.sleep(0.02)
    with open(sys.argv[2], "w") as f:
        json.dump({"steps": done, "tokens": tokens}, f)
""")


def run_of(base, name):
    code, doc = get_json(base + "/api/v1/runs?limit=100")
    hits = [r for r in (doc or {}).get("runs", []) if r.get("name") == name] if code == 200 else []
    return hits


def agent():
    return start_agent(["--data-dir", DATA, "--socket", SOCK, "--interval", "0.5"],
                       sim_env("h100x8-training.json"), procs, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


try:
    ap, base, up = agent()
    t.ok(up, "the agent serves")
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    env = pyhelp.child_env(GPUSCOPE_AGENT_SOCKET=SOCK, GPUSCOPE_RUN_NAME=NAME)
    env["PYTHONPATH"] = os.path.join(PYROOT, "gpuscope", "_auto") + os.pathsep + PYROOT
    job = subprocess.Popen([PYTHON, script, str(STEPS), COUNT], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    procs.append(job)
    first = wait_until(lambda: [r for r in run_of(base, NAME)
                                if r.get("state") == "running" and (r.get("steps") or 0) >= 20],
                       40)
    t.ok(first, "the unmodified loop's run is live on the agent", detail=run_of(base, NAME))
    rid = (first or [{}])[0].get("id")

    # the agent restarts under the run (the training held meanwhile, to see the state)
    os.kill(job.pid, signal.SIGSTOP)
    stop_agent(ap)
    ap, base, up = agent()
    t.ok(up, "the agent serves again")
    back = wait_until(lambda: run_of(base, NAME), 5) or [{}]
    t.eq((len(back), back[0].get("id"), back[0].get("state")), (1, rid, "interrupted"),
         "just restarted: the run is listed once, same id, interrupted")
    t.ok((back[0].get("steps") or 0) >= 20,
         "the steps stored before the restart are kept", detail=back[0])
    os.kill(job.pid, signal.SIGCONT)
    resumed = wait_until(lambda: [r for r in run_of(base, NAME) if r.get("state") == "running"],
                         10)
    t.ok(resumed and resumed[0].get("id") == rid,
         "the package reconnects: the same run is running again", detail=run_of(base, NAME))
    # again, the training going on while the agent is away for a second: its steps wait in
    # the package's queue and reach the resumed run
    mid = (resumed or [{}])[0].get("steps") or 0
    more = wait_until(lambda: [r for r in run_of(base, NAME) if (r.get("steps") or 0) >= mid + 20],
                      20)
    t.ok(more, "steps arrive after the resume", detail=run_of(base, NAME))
    stop_agent(ap)
    time.sleep(1.0)
    ap, base, up = agent()
    t.ok(up and job.poll() is None, "the agent is back while the training goes on")
    out, err = job.communicate(timeout=60)
    t.ok(job.returncode == 0, "the training finished", detail=err[-400:])
    with open(COUNT) as f:
        count = json.load(f)
    want = count["steps"]
    end = wait_until(lambda: [r for r in run_of(base, NAME) if r.get("state") == "ended"], 10)
    allr = run_of(base, NAME)
    t.eq((len(allr), (end or [{}])[0].get("id")), (1, rid), "one run, not two, ended")
    got = (end or [{}])[0].get("steps") or 0
    t.ok(want == STEPS and 0.95 * want <= got <= want,
         "steps kept %d of the script's own %d (>= 95 %%)" % (got, want))
    code, rep = get_json("%s/api/v1/runs/%s" % (base, rid))
    ro = rep.get("run", {})
    t.ok(code == 200 and isinstance(ro.get("records_dropped"), int) and
         got + ro["records_dropped"] <= want,
         "the report says what the sender dropped while the agent was away (%s)"
         % ro.get("records_dropped"), detail=ro)
    t.eq(ro.get("interrupted"), None, "a resumed run that ended normally is not 'interrupted'")
    # the steps stored before the restarts carry their tokens back into the resumed run
    # (history schema v6): every step received counts the script's 16 x 8 token ids
    t.ok(count["tokens"] == 128 * want and rep.get("train_tokens") == 128 * got,
         "train_tokens: the script's 128 tokens for each of the %d steps kept, those stored "
         "before the restarts included (%s of the script's %d)"
         % (got, rep.get("train_tokens"), count["tokens"]))

    # under `gpuscope run` (its own receiver), the copy its run sends the agent resumes too
    out = os.path.join(tmp, "gsrun")
    env2 = pyhelp.child_env(NO_COLOR="1", GPUSCOPE_AGENT_SOCKET=SOCK)
    job2 = subprocess.Popen([BIN, "run", "--name", "gsrun-resume", "--out", out, "--", PYTHON,
                             script, "200", COUNT], env=env2, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    procs.append(job2)
    first = wait_until(lambda: [r for r in run_of(base, "gsrun-resume")
                                if (r.get("steps") or 0) >= 20], 40)
    t.ok(first, "gpuscope run: the run is on the agent too", detail=run_of(base, "gsrun-resume"))
    stop_agent(ap)
    ap, base, up = agent()
    out2, err2 = job2.communicate(timeout=90)
    t.ok(job2.returncode == 0, "gpuscope run: the training finished", detail=err2[-400:])
    end = wait_until(lambda: [r for r in run_of(base, "gsrun-resume")
                              if r.get("state") == "ended"], 10)
    allr = run_of(base, "gsrun-resume")
    got = (end or [{}])[0].get("steps") or 0
    code, rep = get_json("%s/api/v1/runs/%s" % (base, (end or [{}])[0].get("id")))
    missed = rep.get("run", {}).get("records_dropped")
    t.ok(len(allr) == 1 and end and end[0].get("id") == (first or [{}])[0].get("id") and
         isinstance(missed, int) and got + missed == 200,
         "gpuscope run: the agent's copy is resumed, one run; its steps (%d) and those it "
         "missed while away (%s) make the script's 200" % (got, missed), detail=allr)
    with open(os.path.join(out, "steps.jsonl")) as f:
        jsonl = f.read()
    # (the token counts, "tokens", "train_tokens", "model_flops_per_token", ..., are not it)
    words = [w for w in re.findall(r"\w*token\w*", json.dumps(rep))
             if "tokens" not in w and not w.endswith("per_token")]
    t.ok('"hello"' in jsonl and '"token"' not in jsonl and not words,
         "the resume token is in no file and no answer (steps.jsonl, the agent's report)",
         detail=words[:6])
finally:
    clean_up(procs, [tmp])
pyhelp.exit_now(t.done())
