"""A stand-in for accelerate (not installable here) following its documented loop:

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(batch); accelerator.backward(loss)
            optimizer.step(); optimizer.zero_grad()

AcceleratedOptimizer.step() is called every micro-batch and steps the real optimizer only when
the gradient state syncs (the last micro-batch of an accumulation window)."""
import contextlib

from .optimizer import AcceleratedOptimizer, GradientState


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1):
        self.gradient_state = GradientState()
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self._micro = 0

    def prepare(self, model, optimizer, loader):
        return model, AcceleratedOptimizer(optimizer, self.gradient_state), loader

    @contextlib.contextmanager
    def accumulate(self, model):
        self._micro += 1
        self.gradient_state.sync_gradients = self._micro % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()
