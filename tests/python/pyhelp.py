"""Shared pieces of the Python package tests: paths, a small model, slow and fast datasets,
a subprocess environment with the package on PYTHONPATH, and exit_now (gsenv's): every test
here imports torch and ends with pyhelp.exit_now(t.done()), leaving without torch 1.13's C++
teardown (it aborted once at exit after every check had passed) and with what it started
stopped.

PYTHONPATH=<build>/python is set by tests/python/meson.build; the paths below also work
when a test is run by hand from the source tree with GPUSCOPE_BUILD_ROOT set.
"""
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
from tap import Tap  # noqa: E402,F401
from gsenv import BUILD, SIM, SRC, exit_now  # noqa: E402,F401

PYROOT = os.path.join(BUILD, "python")
# A package already on the path (PYTHONPATH from meson, or from `gpuscope run` in a child whose
# environment has no GPUSCOPE_BUILD_ROOT) is the one under test: never shadow it with ./build's.
if PYROOT not in sys.path and importlib.util.find_spec("gpuscope") is None:
    sys.path.insert(0, PYROOT)
FAKE_HF = os.path.join(HERE, "fake_hf")
PYTHON = "/usr/bin/python3"

import torch  # noqa: E402

torch.set_num_threads(1)  # 2 cores shared by several test runs


class Net(torch.nn.Module):
    """A small MLP; called as model(x) -> logits, or model(x=..., labels=...) -> dict with
    loss (the Hugging Face convention)."""

    def __init__(self, d_in=32, d_hidden=64):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(d_in, d_hidden), torch.nn.ReLU(),
                                        torch.nn.Linear(d_hidden, 1))

    def forward(self, x, labels=None):
        out = self.body(x)
        if labels is None:
            return out
        return {"loss": torch.nn.functional.mse_loss(out.squeeze(-1), labels), "logits": out}


class SlowDataset(torch.utils.data.Dataset):
    """Samples that take sleep_s each to produce (a DataLoader made slow on purpose)."""

    def __init__(self, n, d_in=32, sleep_s=0.0, dict_items=False):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, d_in, generator=g)
        self.y = torch.randn(n, generator=g)
        self.sleep_s = sleep_s
        self.dict_items = dict_items

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.dict_items:
            return {"x": self.x[i], "labels": self.y[i]}
        return self.x[i], self.y[i]


class PreBatched(torch.utils.data.Dataset):
    """Whole batches made in advance: fetching one is a list index (a fast loader)."""

    def __init__(self, n_batches, batch, d_in=32, dict_items=False):
        g = torch.Generator().manual_seed(2)
        self.items = []
        for _ in range(n_batches):
            x, y = torch.randn(batch, d_in, generator=g), torch.randn(batch, generator=g)
            self.items.append({"x": x, "labels": y} if dict_items else (x, y))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def loader(ds, batch=None):
    if batch is None:  # PreBatched: no collation
        return torch.utils.data.DataLoader(ds, batch_size=None, shuffle=False)
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=False)


def child_env(**extra):
    """An environment for a child Python with the package importable and no inherited
    gpuscope / sim settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUSCOPE_", "NVML_SIM"))}
    env["PYTHONPATH"] = PYROOT
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def near(got, want, rel, abs_=0.0):
    return got is not None and want is not None and abs(got - want) <= max(abs_, rel * abs(want))
