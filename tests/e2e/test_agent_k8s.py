"""Kubernetes pod labels end to end: a real process in a real cgroup laid out as the kubelet
lays out a pod's (created for the test, then removed), a temporary kubelet log tree naming the
pod, and `gpuscope agent` on an nvml-sim scenario whose GPU 0 process is that real pid.

Checks that /metrics (metrics_compat = dcgm) puts dcgm-exporter's pod, namespace and container
labels on every DCGM_FI_* series of GPU 0 and none on GPU 1 (a process outside any pod),
gpuscope_gpu_pod_info beside the native series, the pod object in /api/v1/snapshot, the quick
check's `pod:<namespace>/<name>`, and `kubernetes_pods_dir = off` turning the names off.

Needs root and a cgroup hierarchy it may create groups in (cgroup v1's pids or name=systemd
hierarchy with the cgroupfs layout, or cgroup v2 with the systemd layout); skipped otherwise.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import SRC, BIN, clean_up_at_exit, get_text, sim_env, start_agent, stop_proc  # noqa: E402
from tap import Tap  # noqa: E402

t = Tap()
# unique to this test process, so that parallel runs (other builds) never share a cgroup
UID = "8a0f8f3c-64a4-4d6b-9c1e-%012x" % os.getpid()
CID = "4f6c2d3e8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6071%016x" % os.getpid()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-k8s.")
made = []  # cgroup directories made, innermost last


def candidates():
    """(mount point, path under it) pairs to try: v1 cgroupfs driver, v2 systemd driver."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype, opts = line.split()[:4]
            if fstype == "cgroup" and ("pids" in opts.split(",") or "name=systemd" in opts):
                out.append((mnt, "kubepods/burstable/pod%s/%s" % (UID, CID)))
            elif fstype == "cgroup2":
                und = UID.replace("-", "_")
                out.append((mnt, "kubepods.slice/kubepods-burstable.slice/"
                                 "kubepods-burstable-pod%s.slice/cri-containerd-%s.scope"
                            % (und, CID)))
    return out


def into_pod_cgroup(pid):
    """Moves pid into a pod-shaped cgroup; returns the /proc/PID/cgroup text, or None."""
    for mnt, rel in candidates():
        path = mnt
        ok = True
        for part in rel.split("/"):
            path = os.path.join(path, part)
            if os.path.isdir(path):
                continue
            try:
                os.mkdir(path)
                made.append(path)
            except OSError:
                ok = False
                break
        if not ok:
            continue
        try:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            continue
        text = open("/proc/%d/cgroup" % pid).read()
        if ("pod" + UID) in text or ("pod" + UID.replace("-", "_")) in text:
            return text
    return None


def ours(p):
    """A directory only this test process makes (named by its UID or container id); the
    shared parents (kubepods/, burstable/) may hold another run's."""
    return UID in p or UID.replace("-", "_") in p or CID in p


def remove_cgroups():
    for p in reversed(made):
        for _ in range(50 if ours(p) else 1):
            try:
                os.rmdir(p)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)  # the killed sleeper leaves the group a moment later


def lines(text, name):
    return [ln for ln in text.splitlines() if ln.startswith(name + "{")]


def main():
    if not os.path.exists(BIN):
        t.skip("pod labels", "no gpuscope binary at %s" % BIN)
        return t.done()
    if os.geteuid() != 0:
        t.skip("pod labels", "not root: cannot make a pod-shaped cgroup")
        return t.done()
    clean_up_at_exit(procs, [tmp])
    sleeper = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    procs.append(sleeper)
    try:
        cg = into_pod_cgroup(sleeper.pid)
        if cg is None:
            t.skip("pod labels", "no cgroup hierarchy lets the test make a pod-shaped group")
            return t.done()
        t.ok(True, "a real process in a pod-shaped cgroup", detail=cg.strip())
        run(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
        remove_cgroups()
    t.ok(not any(os.path.isdir(p) for p in made if ours(p)), "the test's cgroups are removed",
         detail=[p for p in made if os.path.isdir(p)])
    return t.done()


def run(pid):
    pods = os.path.join(tmp, "log", "pods")
    os.makedirs(os.path.join(pods, "ml-team_trainer-7d9f8c6b5-x2kqp_" + UID, "pytorch"))
    os.makedirs(os.path.join(pods, "other_web-0_0d3b7e52-91f3-4c39-a7d1-6c2d2e8f5b20", "nginx"))
    base = json.load(open(os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")))
    scen = {k: base[k] for k in ("scenario_version", "driver_version", "cuda_driver_version",
                                 "templates")}
    scen["gpus"] = base["gpus"][:2]
    scen["processes"] = [
        {"id": "pod", "pid": {"env": "GS_K8S_PID"}, "gpu": 0, "type": "compute",
         "used_memory_mib": 30000},
        {"id": "self", "pid": {"env": "GS_K8S_SELF"}, "gpu": 1, "type": "compute",
         "used_memory_mib": 1000},
    ]
    scen["events"] = []
    path = os.path.join(tmp, "k8s.json")
    with open(path, "w") as f:
        json.dump(scen, f)
    env = sim_env(path, "10", GS_K8S_PID=str(pid), GS_K8S_SELF=str(os.getpid()))

    sock = os.path.join(tmp, "agent.sock")
    p, base_url, ok = start_agent(["--data-dir", os.path.join(tmp, "data"), "--history", "off",
                                   "--metrics-compat", "dcgm", "--socket", "off",
                                   "--http-socket", sock, "--kubernetes-pods-dir", pods],
                                  env, procs)
    t.ok(ok, "the agent answers")
    if not ok:
        return
    _, m = get_text(base_url + "/metrics")
    want = ',pod="trainer-7d9f8c6b5-x2kqp",namespace="ml-team",container="pytorch"}'
    dcgm0 = [ln for ln in m.splitlines() if ln.startswith("DCGM_FI_") and 'gpu="0"' in ln]
    dcgm1 = [ln for ln in m.splitlines() if ln.startswith("DCGM_FI_") and 'gpu="1"' in ln]
    t.ok(dcgm0 and all(want in ln for ln in dcgm0),
         "every DCGM_FI_* series of GPU 0 carries pod, namespace, container",
         detail=[ln for ln in dcgm0 if want not in ln][:3] or dcgm0[:2])
    t.ok(dcgm1 and not any(",pod=" in ln for ln in dcgm1),
         "GPU 1 (a process outside any pod): no pod labels", detail=dcgm1[:2])
    info = lines(m, "gpuscope_gpu_pod_info")
    t.ok(len(info) == 1 and 'gpu="0"' in info[0] and ('pod_uid="%s"' % UID) in info[0] and
         want[:-1] in info[0], "gpuscope_gpu_pod_info names GPU 0's pod", detail=info)
    util = lines(m, "gpuscope_gpu_utilization_ratio")
    t.ok(util and not any(",pod=" in ln for ln in util),
         "the native GPU series keep their labels", detail=util[:1])
    _, body = get_text(base_url + "/api/v1/snapshot")
    doc = json.loads(body)
    pr = [x for g in doc["gpus"] for x in g.get("processes", []) if x.get("pid") == pid]
    t.ok(pr and pr[0].get("pod") == {"name": "trainer-7d9f8c6b5-x2kqp", "namespace": "ml-team",
                                     "container": "pytorch"} and pr[0].get("pod_uid") == UID,
         "/api/v1/snapshot: the process's pod object and UID", detail=pr)
    # the quick check through the agent (the snapshot document carries the names)
    r = subprocess.run([BIN, "--show-container", "--no-color"],
                       env=dict(env, GPUSCOPE_HTTP_SOCKET=sock), capture_output=True, text=True,
                       timeout=30)
    t.ok(r.returncode == 0 and "via agent:" in r.stdout and
         re.search(r"/%d\([^)]*pod:ml-team/trainer-7d9f8c6b5-x2kqp" % pid, r.stdout),
         "gpuscope --show-container via the agent: pod:ml-team/trainer-7d9f8c6b5-x2kqp",
         detail=r.stdout + r.stderr)
    t.eq(stop_proc(p), 0, "the agent stops cleanly")

    p, base_url, ok = start_agent(["--data-dir", os.path.join(tmp, "data"), "--history", "off",
                                   "--metrics-compat", "dcgm", "--socket", "off",
                                   "--http-socket", "off", "--kubernetes-pods-dir", "off"],
                                  env, procs)
    _, m = get_text(base_url + "/metrics") if ok else (0, "")
    t.ok(ok and "DCGM_FI_DEV_GPU_UTIL{" in m and ",pod=" not in m,
         "kubernetes_pods_dir = off: no pod labels", detail=m[:200])
    if ok:
        stop_proc(p)


if __name__ == "__main__":
    sys.exit(main())
