"""A Trainer whose train() calls the callbacks in the order of transformers'
Trainer._inner_training_loop (4.4x/4.5x):

  on_train_begin
  per epoch: on_epoch_begin
    per update: batches of the update fetched up front (get_batch_samples), then per
      micro-batch: with include_num_input_tokens_seen, state.num_input_tokens_seen += the
      micro-batch's main input's numel ("non_padding": its attention_mask's sum when it has
      one), summed over every process (accelerator.gather), then on_step_begin (first micro-batch only: step % GA == 0), training_step
      (forward, loss / GA, backward); on the last micro-batch: on_pre_optimizer_step,
      optimizer.step(), on_optimizer_step, lr_scheduler.step(), zero_grad, global_step += 1,
      on_step_end, _maybe_log_save_evaluate (on_log every logging_steps); else on_substep_end
    on_epoch_end, _maybe_log_save_evaluate
  speed_metrics -> log(metrics) (on_log with train_runtime, ...) -> on_train_end

It also measures, with its own clock, what the test checks the report against. With a
torch.distributed process group initialised it trains through a DistributedDataParallel
wrapper, as the real Trainer does after accelerator.prepare, and hands the callbacks the
unwrapped model.

As the real one (transformers 4.4x): __init__ builds the accelerator from
args.gradient_accumulation_steps (kept as self.accelerator_gradient_accumulation_steps);
get_train_dataloader builds the DataLoader in train() from args (batch size, the
dataloader_* fields: num_workers, pin_memory, persistent_workers, drop_last, prefetch_factor),
unless the test hands a ready one (dataloader=); the DDP wrapper gets args.ddp_bucket_cap_mb as
bucket_cap_mb when it is set.
"""
import math
import time

import torch

from .trainer_callback import CallbackHandler, TrainerControl, TrainerState


class Trainer:
    def __init__(self, model=None, args=None, train_dataset=None, data_collator=None,
                 callbacks=None, dataloader=None):
        self.model = model
        if args is None:  # as the real one: default arguments in ./tmp_trainer
            from .training_args import TrainingArguments
            args = TrainingArguments(output_dir="tmp_trainer")
        self.args = args
        self.train_dataset = train_dataset
        self.data_collator = data_collator
        self._dataloader = dataloader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: 1.0)
        self.callback_handler = CallbackHandler(list(callbacks or []), model, None,
                                                self.optimizer, self.lr_scheduler)
        self.state = TrainerState()
        self.control = TrainerControl()
        self.control = self.callback_handler.on_init_end(self.args, self.state, self.control)
        self.measured = {"data_s": 0.0, "step_s": 0.0, "steps": 0}
        # create_accelerator_and_postprocess: the GradientAccumulationPlugin's steps
        self.accelerator_gradient_accumulation_steps = args.gradient_accumulation_steps

    def add_callback(self, callback):
        self.callback_handler.add_callback(callback)

    def get_train_dataloader(self):
        if self._dataloader is not None:
            return self._dataloader
        ds = self.train_dataset
        params = {"batch_size": self.args.train_batch_size, "collate_fn": self.data_collator,
                  "num_workers": self.args.dataloader_num_workers,
                  "pin_memory": self.args.dataloader_pin_memory,
                  "persistent_workers": self.args.dataloader_persistent_workers}
        if not isinstance(ds, torch.utils.data.IterableDataset):
            params["sampler"] = torch.utils.data.RandomSampler(ds)
            params["drop_last"] = self.args.dataloader_drop_last
            # transformers passes it always (torch >= 2.0 takes None); torch 1.x's default is 2
            if self.args.dataloader_prefetch_factor is not None:
                params["prefetch_factor"] = self.args.dataloader_prefetch_factor
        return torch.utils.data.DataLoader(ds, **params)

    def log(self, logs):
        logs = dict(logs)
        logs["epoch"] = self.state.epoch
        self.state.log_history.append({**logs, "step": self.state.global_step})
        self.control = self.callback_handler.on_log(self.args, self.state, self.control, logs)

    def training_step(self, model, inputs):
        model.train()
        out = model(**inputs)
        loss = out["loss"] / self.args.gradient_accumulation_steps
        loss.backward()
        return loss.detach()

    def _count_tokens(self, inputs):
        # as the Trainer (4.5x): the model's main input, counted before its forward
        name = getattr(self.model, "main_input_name", "input_ids")
        if name not in inputs:
            return
        mode = self.args.include_num_input_tokens_seen
        if mode == "non_padding" and "attention_mask" in inputs:
            n = int(inputs["attention_mask"].sum())
        else:
            n = inputs[name].numel()
        # accelerator.gather(tokens).sum(): every process's count, the job's
        x = torch.tensor([n], dtype=torch.int64)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(x)
        self.state.num_input_tokens_seen += int(x.sum().item())

    def _maybe_log_save_evaluate(self, tr_loss):
        if self.state.global_step % self.state.logging_steps == 0:
            self.log({"loss": float(tr_loss), "learning_rate": self.args.learning_rate})

    def train(self):
        args = self.args
        loader = self.get_train_dataloader()
        self.callback_handler.train_dataloader = loader
        ga = args.gradient_accumulation_steps
        updates_per_epoch = max(len(loader) // ga, 1)
        epochs = math.ceil(args.num_train_epochs)
        self.state.max_steps = updates_per_epoch * epochs
        self.state.logging_steps = int(args.logging_steps)
        start_time = time.time()
        self.control = self.callback_handler.on_train_begin(args, self.state, self.control)
        tr_loss = torch.tensor(0.0)
        model = self.model
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # as the Trainer does (accelerator.prepare): train through a DDP wrapper while the
            # callbacks keep getting the unwrapped model
            kwargs = {}
            if args.ddp_bucket_cap_mb is not None:  # _wrap_model
                kwargs["bucket_cap_mb"] = args.ddp_bucket_cap_mb
            model = torch.nn.parallel.DistributedDataParallel(self.model, **kwargs)
            self.model_wrapped = model
        for epoch in range(epochs):
            self.control = self.callback_handler.on_epoch_begin(args, self.state, self.control)
            it = iter(loader)
            step = -1
            for _ in range(updates_per_epoch):
                t_fetch = time.perf_counter()
                batch_samples = [next(it) for _ in range(ga)]  # get_batch_samples
                self.measured["data_s"] += time.perf_counter() - t_fetch
                for i, inputs in enumerate(batch_samples):
                    step += 1
                    if args.include_num_input_tokens_seen:
                        self._count_tokens(inputs)
                    do_sync_step = (step + 1) % ga == 0
                    if step % ga == 0:
                        t_step = time.perf_counter()
                        self.control = self.callback_handler.on_step_begin(args, self.state,
                                                                           self.control)
                    tr_loss = tr_loss + self.training_step(model, inputs)
                    if do_sync_step:
                        self.control = self.callback_handler.on_pre_optimizer_step(
                            args, self.state, self.control)
                        self.optimizer.step()
                        self.control = self.callback_handler.on_optimizer_step(
                            args, self.state, self.control)
                        self.lr_scheduler.step()
                        model.zero_grad()
                        self.state.global_step += 1
                        self.state.epoch = epoch + (step + 1) / (updates_per_epoch * ga)
                        self.control = self.callback_handler.on_step_end(args, self.state,
                                                                         self.control)
                        self.measured["step_s"] += time.perf_counter() - t_step
                        self.measured["steps"] += 1
                        self._maybe_log_save_evaluate(tr_loss)
                    else:
                        self.control = self.callback_handler.on_substep_end(
                            args, self.state, self.control)
            self.control = self.callback_handler.on_epoch_end(args, self.state, self.control)
            self._maybe_log_save_evaluate(tr_loss)
        runtime = time.time() - start_time
        num_samples = self.state.max_steps * args.per_device_train_batch_size * ga
        metrics = {"train_runtime": round(runtime, 4),
                   "train_samples_per_second": round(num_samples / runtime, 3),
                   "train_steps_per_second": round(self.state.max_steps / runtime, 3),
                   "total_flos": 0.0,
                   "train_loss": float(tr_loss) / max(self.state.global_step, 1)}
        self.measured["metrics"] = metrics
        self.log(metrics)
        self.control = self.callback_handler.on_train_end(args, self.state, self.control)
        return metrics
