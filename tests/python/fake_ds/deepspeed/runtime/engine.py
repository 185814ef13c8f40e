"""DeepSpeedEngine stand-in: forward, backward(loss), step() and
is_gradient_accumulation_boundary() with DeepSpeed's documented semantics (the micro-step
counter advances in step(); the wrapped optimizer steps and zeroes the gradients only when
the micro-step closes an accumulation window)."""
import torch


class DeepSpeedEngine(torch.nn.Module):
    def __init__(self, module, optimizer, gradient_accumulation_steps=1):
        super().__init__()
        self.module = module
        self.optimizer = optimizer
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.micro_steps = 0
        self.global_steps = 0

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def is_gradient_accumulation_boundary(self):
        return (self.micro_steps + 1) % self.gradient_accumulation_steps == 0

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()
        return loss

    def step(self):
        if self.is_gradient_accumulation_boundary():
            self.optimizer.step()
            self.optimizer.zero_grad()
            self.global_steps += 1
        self.micro_steps += 1
