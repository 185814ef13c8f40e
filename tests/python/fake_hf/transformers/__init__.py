"""A tiny stand-in for the `transformers` package (not installable here): just what a
TrainerCallback sees. Like the real one, `Trainer` is resolved lazily from
transformers.trainer (so gpuscope's import hook on that module is exercised)."""
from .trainer_callback import TrainerCallback, TrainerControl, TrainerState  # noqa: F401
from .training_args import TrainingArguments  # noqa: F401

__version__ = "0.0.fake"


def __getattr__(name):
    if name == "Trainer":
        from .trainer import Trainer
        return Trainer
    raise AttributeError(name)
