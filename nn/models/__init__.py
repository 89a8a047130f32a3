"""nn's models: whole networks built from nn's layers (GPT), and GPT-2's file formats (gpt_io)."""
from .gpt import GPT
from .gpt_io import GPTLoadError

__all__ = ["GPT", "GPTLoadError"]
