"""TrainingArguments: the fields a TrainerCallback reads and the Trainer builds its
dataloaders and DDP wrapper from, with transformers' defaults and its __post_init__ check of
dataloader_prefetch_factor (transformers 4.4x)."""
import dataclasses


@dataclasses.dataclass
class TrainingArguments:
    output_dir: str = "trainer_output"
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    num_train_epochs: float = 1.0
    max_steps: int = -1
    logging_steps: float = 500
    learning_rate: float = 5e-5
    run_name: str = None
    process_index: int = 0
    local_process_index: int = 0
    world_size: int = 1
    dataloader_num_workers: int = 0
    dataloader_pin_memory: bool = True
    dataloader_prefetch_factor: int = None
    dataloader_persistent_workers: bool = False
    dataloader_drop_last: bool = False
    ddp_bucket_cap_mb: int = None
    gradient_checkpointing: bool = False
    bf16: bool = False
    fp16: bool = False
    ddp_find_unused_parameters: bool = None
    save_steps: float = 500
    include_num_input_tokens_seen: object = False  # True / "all", "non_padding", False

    def __post_init__(self):
        if self.dataloader_num_workers == 0 and self.dataloader_prefetch_factor is not None:
            raise ValueError("--dataloader_prefetch_factor can only be set when data is loaded "
                             "in a different process, i.e. when --dataloader_num_workers > 1.")

    @property
    def train_batch_size(self):
        return self.per_device_train_batch_size  # one device per process here
