"""nn's models: whole networks built from nn's layers (GPT)."""
from .gpt import GPT

__all__ = ["GPT"]
