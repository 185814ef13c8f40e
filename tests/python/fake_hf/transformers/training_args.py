"""TrainingArguments: the fields a TrainerCallback reads, with transformers' defaults."""
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
    gradient_checkpointing: bool = False
    bf16: bool = False
    fp16: bool = False
    ddp_find_unused_parameters: bool = None
    save_steps: float = 500
    include_num_input_tokens_seen: object = False  # True / "all", "non_padding", False
