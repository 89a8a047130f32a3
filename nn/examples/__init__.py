"""Runnable examples: python -m nn.examples.digits | mnist | lstm."""
