"""Shared helpers of the end-to-end tests: paths, a free port, an HTTP GET, the sim environment.

Stdlib only. The paths come from the environment meson sets (tap_env), else from this file's place.
"""

import os
import socket
import urllib.error
import urllib.request

SRC = os.environ.get("GPUSCOPE_SOURCE_ROOT",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("GPUSCOPE_BUILD_ROOT", os.path.join(SRC, "build"))
BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(BUILD, "gpuscope"))
SIM = os.environ.get("GPUSCOPE_SIM_LIB", os.path.join(BUILD, "sim", "libnvidia-ml.so.1"))
SCENARIOS = os.path.join(SRC, "sim", "scenarios")
# The agent's sockets default to $RUNTIME_DIRECTORY (systemd's); tests point it at a directory
# private to the test process.
TEST_RUNTIME_DIR = "/tmp/gpuscope-test-%d" % os.getpid()
TEST_STEPS_SOCKET = TEST_RUNTIME_DIR + "/steps.sock"


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(url, method="GET", data=None, timeout=5):
    """Returns (status, headers, body text); an HTTP error status is returned, not raised."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, data=data, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def sim_env(scenario, time=None, **extra):
    """The environment for gpuscope on nvml-sim: no inherited NVML_SIM_*, the sim library,
    the scenario (a file name under sim/scenarios, or a path), UTC, NVML_SIM_TIME when time
    is given (else the real clock), the agent's sockets (steps.sock, agent.sock) in a directory
    private to this test process (so test agents started as root never bind, and clients never
    find, the system's /run/gpuscope), then extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    env.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=os.path.join(SCENARIOS, scenario),
               TZ="UTC", GPUSCOPE_AGENT_SOCKET=TEST_STEPS_SOCKET,
               RUNTIME_DIRECTORY=TEST_RUNTIME_DIR)
    if time is not None:
        env["NVML_SIM_TIME"] = str(time)
    env.update(extra)
    return env
