"""nn's kernel launchers, one module per family of nn/cuda/ (`conv.py` launches `conv.cu`, ...): each function
checks its arguments, computes the grid and launches one kernel; nothing here computes on the host.

    common      where nn/cuda/ is, get_kernel, the dtype checks, gemm with an accumulator-dtype output
    activation  activation.cu (and the bias gradients, through gpublas' reductions)
    conv, pool, dropout, batchnorm, embedding, lstm, layernorm, attention, loss, optim: their .cu files
    prefetch    nn.prefetch: the families a model, loss and optimizer will launch, compiled ahead

Layers reach the launchers as `from .. import kernels as K; K.im2col(...)`; attention's and LayerNorm's as
their modules (`kernels.attention`, `kernels.layernorm`), whose names (forward, tiles, ...) are their own.
"""
from .common import KERNELS, SIM_IN_ORDER, acc_dtype, gemm, get_kernel, in_order_geometry
from .activation import (ACT, FROM_INPUT, act_backward, act_backward_input, act_code, act_forward, bias_act_forward,
                         bias_grad_sum)
from .batchnorm import BN_THREADS, bn_backward, bn_forward, bn_stats
from .conv import cnp_to_nchw_bias, col2im, im2col
from .dropout import dropout_advance, dropout_backward, dropout_forward
from .embedding import EMB_RUN, EMB_THREADS, embedding_backward, embedding_forward
from .lstm import LSTM_RUN, lstm_gates_backward, lstm_gates_forward, swap01
from .pool import avgpool_backward, avgpool_forward, maxpool_backward, maxpool_forward
from .loss import SIM_XENT_ROWS, loss_track, mse_forward, softmax_xent_forward, sum_scaled, xent_scale
from .optim import adam_update, clip_coef, clip_scale, optim_tick, scale_inplace, sgd_update, sumsq
from . import attention, layernorm  # noqa: E402,F401 (kernels.attention, kernels.layernorm)
