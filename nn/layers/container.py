"""Sequential: layers applied in order; backward runs them in reverse. Children are named by index
("0", "1", ...) so parameter names are PyTorch's ("0.weight")."""
from ..module import Module


class Sequential(Module):
    def __init__(self, *layers):
        super().__init__()
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: item {i} is a {type(layer).__name__}, not an nn.Module")
            setattr(self, str(i), layer)

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, x):
        for layer in self._modules.values():
            x = layer(x)
        return x

    def backward(self, dy):
        for layer in reversed(self._modules.values()):
            dy = layer.backward(dy)
        return dy
