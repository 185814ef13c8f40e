"""A stand-in for DeepSpeed (not installable here) that follows its documented training loop:

    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=...)
    for batch in loader:
        loss = engine(batch)        # forward
        engine.backward(loss)       # backward (+ gradient reduction)
        engine.step()               # optimizer step at gradient-accumulation boundaries only

It is enough to check that gpuscope's loop tracker recognises the engine: its step() is the
optimizer step only at a boundary, and optimizer.step() is never called by the loop.
"""
from .runtime.engine import DeepSpeedEngine


def initialize(model=None, optimizer=None, config=None, **kwargs):
    ga = int((config or {}).get("gradient_accumulation_steps", 1))
    engine = DeepSpeedEngine(model, optimizer, ga)
    return engine, optimizer, None, None
