"""nn's layers: each a Module with forward(x) and backward(dy)."""
