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


class ModuleList(Module):
    """torch.nn.ModuleList: modules held in a list, named by index ("0", "1", ...) so that state_dict keys are
    torch's ("layers.0.linear1.weight"); no forward of its own (the owner calls its items in its own order)."""

    def __init__(self, modules=None):
        super().__init__()
        self.extend(modules or [])

    def _check(self, m):
        if not isinstance(m, Module):
            raise TypeError(f"ModuleList: item is a {type(m).__name__}, not an nn.Module")
        return m

    def append(self, module):
        setattr(self, str(len(self)), self._check(module))
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self)
        items.insert(index, self._check(module))
        self._modules.clear()
        return self.extend(items)

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        items = list(self._modules.values())
        return ModuleList(items[i]) if isinstance(i, slice) else items[i]

    def __setitem__(self, i, module):
        setattr(self, list(self._modules)[i], self._check(module))

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, *args):
        raise NotImplementedError("ModuleList has no forward: call its modules in your own forward")
