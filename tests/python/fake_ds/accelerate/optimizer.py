"""AcceleratedOptimizer stand-in: wraps a torch optimizer; step() and zero_grad() act only
when gradient_state.sync_gradients is True, as accelerate's do under accumulate()."""
import torch


class GradientState:
    def __init__(self):
        self.sync_gradients = True


class AcceleratedOptimizer(torch.optim.Optimizer):
    def __init__(self, optimizer, gradient_state):  # like accelerate: no super().__init__
        self.optimizer = optimizer
        self.gradient_state = gradient_state

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none=None):
        if self.gradient_state.sync_gradients:
            self.optimizer.zero_grad()

    def step(self, closure=None):
        if self.gradient_state.sync_gradients:
            self.optimizer.step(closure)
