"""nn: a small deep-learning package on gpublas, with hand-written backward passes (like llm.c and
Chainer) and PyTorch's conventions (names, layouts, init, update rules), so weights move both ways.

    import nn
    nn.manual_seed(0)
    model = nn.Sequential(nn.Dense(64, 32), nn.ReLU(), nn.Dense(32, 10))
    crit, opt = nn.SoftmaxCrossEntropy(), nn.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss = crit(model(x), labels); opt.zero_grad(); model.backward(crit.backward()); opt.step()

Every forward and backward pass runs as device kernels: gpublas's GEMM plus nn's kernels in
nn/cuda/{activation,conv,pool,dropout,loss,optim,lstm,batchnorm,layernorm,embedding,amp,attention}.cu
(found through the same compile path). nn.amp.GradScaler: dynamic loss scaling for mixed-precision training.
nn.prefetch(model, loss, optimizer) compiles every kernel module they will launch in the background, before
the first batch.
"""
from . import amp, functional
from .amp import autocast
from .checkpoint import load, save
from .gradcheck import GradcheckError, gradcheck
from .init import manual_seed
from .layers.activation import GELU, Flatten, Identity, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .layers.attention import ScaledDotProductAttention
from .layers.container import ModuleList, Sequential
from .layers.conv import Conv2d
from .layers.dense import Dense, Linear
from .layers.dropout import Dropout
from .layers.embedding import Embedding
from .layers.lstm import LSTM
from .layers.norm import BatchNorm1d, BatchNorm2d, LayerNorm
from .layers.pool import AvgPool2d, MaxPool2d
from .layers.multihead import MultiheadAttention
from .layers.transformer import TransformerDecoderLayer, TransformerEncoderLayer
from .layers.transformer_stack import Transformer, TransformerDecoder, TransformerEncoder
from .loss import CrossEntropyLoss, MSELoss, SoftmaxCrossEntropy
from .module import Module, Parameter
from .optim import SGD, Adam, AdamW, CosineLR, StepLR, clip_grad_norm
from .kernels.prefetch import prefetch
from . import models  # noqa: E402 (after the layers it builds on)

__all__ = ["Adam", "AdamW", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "CosineLR", "CrossEntropyLoss",
           "Dense", "Dropout", "Embedding", "Flatten", "GELU", "GradcheckError", "Identity", "LSTM", "LayerNorm", "Linear",
           "LogSoftmax", "MSELoss", "MaxPool2d", "Module", "ModuleList", "MultiheadAttention", "Parameter", "ReLU", "SGD",
           "ScaledDotProductAttention", "Sequential", "Sigmoid", "Softmax", "SoftmaxCrossEntropy", "StepLR", "Tanh",
           "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer", "autocast", "clip_grad_norm", "gradcheck", "load", "manual_seed", "models",
           "prefetch", "save"]
