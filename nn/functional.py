"""nn.functional: the stateless forms of nn's fused ops, with torch.nn.functional's names and arguments
(forward only; the layers hold what backward needs)."""
from .layers.attention import scaled_dot_product_attention

__all__ = ["scaled_dot_product_attention"]
