"""The run's settings ("facts"): what the diagnosis needs to name the option to change.

Collected once, when the run opens, from what the training code already holds: the DataLoader
it iterates, the Hugging Face TrainingArguments, the model, torch and the environment. Each
reader takes only what is cheap and known; an attribute that is missing, odd or raises is left
out (absent, never guessed), and no reader ever lets an exception reach the training loop.

The result is a flat dict of scalars that obeys the wire rules of the hello record
(src/run/record.h): at most MAX_FACTS entries, keys of at most MAX_KEY bytes, strings of at most
MAX_STR bytes without control characters, at most MAX_BYTES as compact JSON. Keys (docs/python.md):
    loader_num_workers, loader_pin_memory, loader_prefetch_factor, loader_batch_size,
    loader_persistent_workers                          the DataLoader as iterated
    dataloader_num_workers, dataloader_pin_memory, dataloader_prefetch_factor,
    dataloader_persistent_workers, per_device_train_batch_size, gradient_accumulation_steps,
    gradient_checkpointing, bf16, fp16, tf32, ddp_find_unused_parameters   TrainingArguments
    attn_implementation, param_dtype, param_count     the model
    model_layers, model_heads, model_head_dim         its config (the MFU's attention term)
    torch_version, cuda_device_name, cpu_count, dist_backend, nccl_version, matmul_allow_tf32,
    NCCL_IB_DISABLE, NCCL_P2P_DISABLE, NCCL_DEBUG      the process
"""
import json
import math
import os
import re
import sys

MAX_FACTS = 32
MAX_KEY = 48
MAX_STR = 128
MAX_BYTES = 3072

HF_ARGS = ("dataloader_num_workers", "dataloader_pin_memory", "dataloader_prefetch_factor",
           "dataloader_persistent_workers", "per_device_train_batch_size",
           "gradient_accumulation_steps", "gradient_checkpointing", "bf16", "fp16", "tf32",
           "ddp_find_unused_parameters")
LOADER_ATTRS = ("num_workers", "pin_memory", "prefetch_factor", "batch_size",
                "persistent_workers")
NCCL_ENV = ("NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "NCCL_DEBUG")

_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,%d}$" % MAX_KEY)
_CTRL = re.compile(r"[\x00-\x1f\x7f]")


def scalar(v):
    """v as a JSON scalar the wire accepts, or None (absent)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -(1 << 53) <= v <= (1 << 53) else None
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, str):
        s = _CTRL.sub("", v)
        while len(s.encode("utf-8")) > MAX_STR:  # cut whole characters, not bytes
            s = s[:-1]
        return s
    return None


def _get(obj, name):
    try:
        return scalar(getattr(obj, name, None))
    except Exception:  # a property that raises: absent
        return None


def from_args(args):
    """The TrainingArguments options the rules use."""
    out = {}
    if args is None:
        return out
    for name in HF_ARGS:
        v = _get(args, name)
        if v is not None:
            out[name] = v
    return out


def from_loader(loader):
    """The DataLoader as iterated (a wrapper that forwards attributes works too)."""
    out = {}
    if loader is None:
        return out
    for name in LOADER_ATTRS:
        v = _get(loader, name)
        if name == "batch_size" and v is None:  # batch_sampler= loaders
            try:
                v = _get(getattr(loader, "batch_sampler", None), "batch_size")
            except Exception:
                v = None
        if v is not None:
            out["loader_" + name] = v
    if out.get("loader_num_workers") == 0:  # no worker processes: prefetching does not apply
        out.pop("loader_prefetch_factor", None)
    return out


# The model config's names of its layers, attention heads, head dimension and width: Hugging
# Face's (num_hidden_layers, num_attention_heads, head_dim, hidden_size) and GPT-2 / nanoGPT's
# (n_layer, n_head, n_embd).
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
_HEADS = ("num_attention_heads", "n_head", "num_heads")
_WIDTH = ("hidden_size", "n_embd", "d_model")


def _first_int(cfg, names):
    for name in names:
        try:
            v = getattr(cfg, name, None)
        except Exception:
            v = None
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def model_shape(cfg):
    """model_layers, model_heads, model_head_dim from a model config (HF's or nanoGPT's);
    a dimension the config does not name is left out."""
    out = {}
    if cfg is None:
        return out
    layers, heads = _first_int(cfg, _LAYERS), _first_int(cfg, _HEADS)
    head_dim = _first_int(cfg, ("head_dim",))
    width = _first_int(cfg, _WIDTH)
    if head_dim is None and width and heads and width % heads == 0:
        head_dim = width // heads
    for k, v in (("model_layers", layers), ("model_heads", heads), ("model_head_dim", head_dim)):
        if v is not None:
            out[k] = v
    return out


def from_model(model):
    """Attention implementation and shape (the model's config), whether it recomputes
    activations, the dominant parameter dtype, parameter count."""
    out = {}
    if model is None:
        return out
    try:
        cfg = getattr(model, "config", None)
        attn = scalar(getattr(cfg, "_attn_implementation", None)) if cfg is not None else None
        if attn:
            out["attn_implementation"] = attn
        out.update(model_shape(cfg))
    except Exception:
        pass
    try:
        gc = getattr(model, "is_gradient_checkpointing", None)  # transformers' PreTrainedModel
        if isinstance(gc, bool):
            out["gradient_checkpointing"] = gc
    except Exception:
        pass
    try:
        by_dtype, total = {}, 0
        for p in model.parameters():
            n = int(p.numel())
            total += n
            key = str(p.dtype).replace("torch.", "")
            by_dtype[key] = by_dtype.get(key, 0) + n
        if total:
            out["param_dtype"] = max(by_dtype.items(), key=lambda kv: kv[1])[0]
            out["param_count"] = total
    except Exception:
        pass
    return out


def from_process(cuda_device=None):
    """torch version, the CUDA device's name, usable CPU cores, NCCL settings."""
    out = {}
    torch = sys.modules.get("torch")
    try:
        if torch is not None:
            out["torch_version"] = scalar(str(torch.__version__))
            if cuda_device is not None:
                out["cuda_device_name"] = scalar(torch.cuda.get_device_name(cuda_device))
            if torch.cuda.is_available():  # fp32 matmuls on tensor cores (the MFU's peak)
                out["matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
    except Exception:
        pass
    try:
        out["cpu_count"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count()
        if n:
            out["cpu_count"] = n
    for name in NCCL_ENV:
        v = os.environ.get(name)
        if v:
            out[name] = scalar(v)
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            out["dist_backend"] = scalar(str(dist.get_backend()))  # "nccl", "gloo", ...
        if (dist is not None and dist.is_available() and dist.is_initialized()
                and str(dist.get_backend()) == "nccl"):
            v = torch.cuda.nccl.version()  # (2, 21, 5); an int such as 2708 in old torch
            out["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
    return {k: v for k, v in out.items() if v is not None}


# Facts only MFU's attention term and its tf32 peak read: they take the room the others leave
# (the diagnosis names settings from the rest), so a crowded hello drops them first.
LAST = frozenset(("model_layers", "model_heads", "model_head_dim", "seq_len",
                  "matmul_allow_tf32"))


def clean(*parts):
    """Merges dicts (an earlier key wins) into a dict that obeys the wire rules; the LAST keys
    after all the others."""
    out, later = {}, []
    for part in parts:
        for k, v in (part or {}).items():
            if k in LAST:
                later.append((k, v))
            elif not _put(out, k, v):
                return out
    for k, v in later:
        if not _put(out, k, v):
            break
    return out


def _put(out, k, v):
    """Adds k: v to out when it obeys the rules and fits; False when out is full."""
    v = scalar(v)
    if v is None or k in out or not isinstance(k, str) or not _KEY.match(k):
        return True
    if len(out) >= MAX_FACTS:
        return False
    out[k] = v
    # the C side writes reals with 17 digits: keep a margin under its limit
    size = len(json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_BYTES - 512:
        del out[k]
        return False
    return True
