#!/usr/bin/python3
"""PyTorch side of the layer, loss and optimizer oracle (tests/oracle/layer_oracle_test.cpp): Keras'
semantics written with torch operations, never from Tandem's code. A case folder's case.json says
which: a layer (below), a loss ("loss": per-sample losses, their mean and its gradient) or an
optimizer ("optimizer": steps over given gradients).

For each folder on the command line, reads <dir>/case.json, written by the C++ test for one layer:
  {"class_name": "MultiHeadAttention", "config": {...Keras config...},
   "inputs": [{"name": "query"|"value"|..., "file": "in0.bin", "shape": [...]}],
   "options": {"use_causal_mask": true}, "training": false,
   "weights": [{"name": "query/kernel", "file": "w0.bin", "shape": [...]}],
   "grad_output": {"file": "dy.bin", "shape": [...]}}
(raw little-endian float32, C order, Keras layouts), computes the layer's output y in float32
PyTorch autograd, then the gradients of sum(y * dy) with respect to every input and weight, and
writes y.bin, dinput<i>.bin and dweight<j>.bin next to case.json. Each layer below is written from
Keras' documented semantics with torch operations, never from Tandem's code.

Exit code 3: torch/numpy missing. Exit code 4: a class this script does not know.
"""

import json
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"keras_torch.py: cannot import {e.name} with {sys.executable}: {e}. "
          "Install Debian's python3-torch (scripts/setup does).", file=sys.stderr)
    sys.exit(3)

torch.set_num_threads(1)


def load(folder, spec):
    data = np.fromfile(os.path.join(folder, spec["file"]), dtype="<f4")
    return torch.tensor(data.reshape(spec["shape"]), dtype=torch.float32, requires_grad=True)


def save(folder, name, tensor):
    tensor.detach().numpy().astype("<f4").tofile(os.path.join(folder, name))


def fold(xs, op):
    out = xs[0]
    for x in xs[1:]:
        out = op(out, x)
    return out


def keras_axis(axis, rank):
    """Keras' axis counts the batch axis; -1 is the last."""
    return axis if axis >= 0 else rank + axis


def elementwise(name):
    ops = {
        "Add": lambda xs: fold(xs, torch.add),
        "Subtract": lambda xs: xs[0] - xs[1],
        "Multiply": lambda xs: fold(xs, torch.mul),
        "Average": lambda xs: fold(xs, torch.add) / len(xs),
        "Maximum": lambda xs: fold(xs, torch.maximum),
        "Minimum": lambda xs: fold(xs, torch.minimum),
    }
    return ops.get(name)


def layer_norm(cfg, xs, w):
    x = xs[0]
    gamma = w.get("gamma")
    beta = w.get("beta")
    epsilon = cfg.get("epsilon", 1e-3)
    if cfg.get("rms_scaling", False):  # Keras: x * rsqrt(var(x) + epsilon) * gamma, no beta
        variance = x.var(dim=-1, unbiased=False, keepdim=True)
        return x * torch.rsqrt(variance + epsilon) * gamma
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, epsilon)


def rms_norm(cfg, xs, w):
    """keras.layers.RMSNormalization: x * rsqrt(mean(x^2) + epsilon) * scale (epsilon 1e-6)."""
    x = xs[0]
    mean_square = (x * x).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(mean_square + cfg.get("epsilon", 1e-6)) * w["scale"]


def multi_head_attention(cfg, inputs, w, options, masks=None):
    """masks: the Keras masks of the call's inputs by name (Embedding's mask_zero, ...), which
    Keras' _compute_attention_mask turns into query_mask[:, :, None] & value_mask[:, None, :] &
    key_mask[:, None, :], with the attention_mask."""
    masks = masks or {}
    query = inputs["query"]
    value = inputs["value"]
    key = inputs.get("key", value)
    key_dim = cfg["key_dim"]

    def project(x, prefix, pattern):
        y = torch.einsum(pattern, x, w[prefix + "/kernel"])
        if prefix + "/bias" in w:
            y = y + w[prefix + "/bias"]
        return y

    q = project(query, "query", "btd,dhk->bthk") * (1.0 / math.sqrt(float(key_dim)))
    k = project(key, "key", "bsd,dhk->bshk")
    v = project(value, "value", "bsd,dhv->bshv")
    scores = torch.einsum("bshk,bthk->bhts", k, q)
    tq, tv = scores.shape[2], scores.shape[3]
    keep = torch.ones(scores.shape[0], 1, tq, tv, dtype=torch.bool)
    if "attention_mask" in inputs:
        keep = keep & (inputs["attention_mask"].detach() != 0).unsqueeze(1)
    if options.get("use_causal_mask", False):
        keep = keep & torch.tril(torch.ones(tq, tv, dtype=torch.bool))
    if "query" in masks:
        keep = keep & (masks["query"] != 0)[:, None, :, None]
    for name in ("value", "key"):
        if name in masks:
            keep = keep & (masks[name] != 0)[:, None, None, :]
    # Keras 3's two paths: without dropout its fused dot_product_attention replaces each hidden
    # score by -0.7 * the float maximum (TensorFlow and JAX backends), so a query that sees no
    # key attends uniformly; with dropout its Softmax layer puts -1e9 there and zeros the hidden
    # probabilities after (where(mask, p, 0)): such a query attends to nothing. torch.where
    # passes no gradient to the replaced scores, as Keras' where.
    large_negative = -1e9 if cfg.get("dropout", 0) > 0 else -0.7 * torch.finfo(torch.float32).max
    probs = torch.softmax(torch.where(keep, scores, torch.tensor(large_negative)), dim=-1)
    if cfg.get("dropout", 0) > 0:
        probs = torch.where(keep, probs, torch.tensor(0.0))
    context = torch.einsum("bhts,bshv->bthv", probs, v)
    out = torch.einsum("bthv,hvo->bto", context, w["attention_output/kernel"])
    if "attention_output/bias" in w:
        out = out + w["attention_output/bias"]
    return out


def grouped_query_attention(cfg, inputs, w, options, masks=None):
    """Keras 3's GroupedQueryAttention: keys and values of num_key_value_heads heads, each
    repeated (ops.repeat along the heads: head u reads kv head u // repeats) to the query heads.
    A head's projection is linear, so repeating the projected keys is repeating the kernel's and
    bias' heads; the rest is MultiHeadAttention's with key_dim = head_dim."""
    repeats = cfg["num_query_heads"] // cfg["num_key_value_heads"]
    expanded = dict(w)
    for name in ("key", "value"):
        expanded[name + "/kernel"] = w[name + "/kernel"].repeat_interleave(repeats, dim=1)
        if name + "/bias" in w:
            expanded[name + "/bias"] = w[name + "/bias"].repeat_interleave(repeats, dim=0)
    as_mha = {"key_dim": cfg["head_dim"], "dropout": cfg.get("dropout", 0)}
    return multi_head_attention(as_mha, inputs, expanded, options, masks)


def tf_same_pads(size, window, stride, dilation=1):
    """TensorFlow's SAME padding (before, after) along one axis."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (window - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def one(v):
    return v[0] if isinstance(v, list) else v


def window1d(cfg):
    return one(cfg["kernel_size"]), one(cfg.get("strides", 1)), one(cfg.get("dilation_rate", 1))


def padded1d(cfg, x):
    """x (batch, steps, channels) as (batch, channels, steps), padded as Keras' 1-D padding."""
    k, s, d = window1d(cfg)
    h = x.permute(0, 2, 1)
    if cfg.get("padding", "valid") == "same":
        h = torch.nn.functional.pad(h, tf_same_pads(h.shape[2], k, s, d))
    if cfg.get("padding") == "causal":  # Keras: (k - 1) * dilation zeros on the left
        h = torch.nn.functional.pad(h, ((k - 1) * d, 0))
    return h


def conv1d(cfg, x, w):
    _, s, d = window1d(cfg)
    y = torch.nn.functional.conv1d(padded1d(cfg, x), w["kernel"].permute(2, 1, 0), w.get("bias"),
                                   stride=s, dilation=d)
    y = y.permute(0, 2, 1)
    return activation(cfg.get("activation", "linear"), y)


def depthwise1d(cfg, x, kernel):
    """Keras' 1-D depthwise kernel (k, in, multiplier): output channel c * multiplier + m."""
    k, channels, multiplier = kernel.shape
    _, s, d = window1d(cfg)
    weight = kernel.permute(1, 2, 0).reshape(channels * multiplier, 1, k)
    y = torch.nn.functional.conv1d(padded1d(cfg, x), weight, None, stride=s, dilation=d,
                                   groups=channels)
    return y.permute(0, 2, 1)


def pair(v):
    return list(v) if isinstance(v, list) else [v, v]


def conv2d_transpose(cfg, x, w):
    """TensorFlow's conv2d_transpose (conv3d_transpose for volumes): the gradient of conv2d with
    respect to its input, whose input (this layer's output) has Keras' deconv_output_length.
    torch's conv_transpose gives the whole transposed convolution; TF's output is its window from
    the forward conv's SAME padding before (zeros where no tap reaches)."""
    axes = x.dim() - 2
    size = pair if axes == 2 else triple
    k, s = size(cfg["kernel_size"]), size(cfg.get("strides", 1))
    d = size(cfg.get("dilation_rate", 1))
    same = cfg.get("padding", "valid") == "same"
    extra = cfg.get("output_padding")
    h = x.permute(0, axes + 1, *range(1, axes + 1))
    transpose = torch.nn.functional.conv_transpose2d if axes == 2 else \
        torch.nn.functional.conv_transpose3d
    full = transpose(h, w["kernel"].permute(axes + 1, axes, *range(axes)), None, stride=s,
                     dilation=d)
    for a in range(axes):
        n, span = x.shape[1 + a], (k[a] - 1) * d[a] + 1
        if extra is None:
            length = n * s[a] if same else n * s[a] + max(span - s[a], 0)
        else:
            length = (n - 1) * s[a] + span - 2 * (span // 2 if same else 0) + size(extra)[a]
        before = tf_same_pads(length, k[a], s[a], d[a])[0] if same else 0
        axis = 2 + a
        short = before + length - full.shape[axis]
        if short > 0:  # F.pad lists the last axis first
            full = torch.nn.functional.pad(full, [0, 0] * (axes - 1 - a) + [0, short])
        full = full.narrow(axis, before, length)
    y = full.permute(0, *range(2, axes + 2), 1)
    if "bias" in w:
        y = y + w["bias"]
    return activation(cfg.get("activation", "linear"), y)


def conv2d_tf(cfg, x, kernel, groups=1):
    """TensorFlow's conv2d (channels_last, SAME or VALID) of x with a torch-layout kernel
    (out, in / groups, kh, kw), without bias."""
    k, s = pair(cfg["kernel_size"]), pair(cfg.get("strides", 1))
    d = pair(cfg.get("dilation_rate", 1))
    h = x.permute(0, 3, 1, 2)
    if cfg.get("padding", "valid") == "same":
        rows = tf_same_pads(h.shape[2], k[0], s[0], d[0])
        cols = tf_same_pads(h.shape[3], k[1], s[1], d[1])
        h = torch.nn.functional.pad(h, (cols[0], cols[1], rows[0], rows[1]))
    y = torch.nn.functional.conv2d(h, kernel, None, stride=s, dilation=d, groups=groups)
    return y.permute(0, 2, 3, 1)


def depthwise(cfg, x, w):
    """Keras' depthwise kernel (kh, kw, in, multiplier): output channel c * multiplier + m."""
    kh, kw, channels, multiplier = w["depthwise_kernel"].shape
    kernel = w["depthwise_kernel"].permute(2, 3, 0, 1).reshape(channels * multiplier, 1, kh, kw)
    return conv2d_tf(cfg, x, kernel, groups=channels)


def biased(cfg, y, w):
    if "bias" in w:
        y = y + w["bias"]
    return activation(cfg.get("activation", "linear"), y)


def triple(v):
    return list(v) if isinstance(v, list) else [v, v, v]


def same_padded3d(cfg, h, k, s, d, value=0.0):
    """h (batch, channels, depth, rows, cols) padded as TensorFlow's SAME, or as it is."""
    if cfg.get("padding", "valid") != "same":
        return h
    pads = []
    for a in (2, 1, 0):  # F.pad lists the last axis first
        pads += tf_same_pads(h.shape[2 + a], k[a], s[a], d[a])
    return torch.nn.functional.pad(h, pads, value=value)


def conv3d(cfg, x, w):
    """Keras' Conv3D, channels_last, kernel (kd, kh, kw, in / groups, filters)."""
    k, s = triple(cfg["kernel_size"]), triple(cfg.get("strides", 1))
    d = triple(cfg.get("dilation_rate", 1))
    h = same_padded3d(cfg, x.permute(0, 4, 1, 2, 3), k, s, d)
    y = torch.nn.functional.conv3d(h, w["kernel"].permute(4, 3, 0, 1, 2), None, stride=s,
                                   dilation=d, groups=cfg.get("groups", 1))
    return biased(cfg, y.permute(0, 2, 3, 4, 1), w)


def pool3d(cfg, x, kind):
    """Keras' 3-D pooling: padded cells never win a maximum and are left out of an average."""
    p = triple(cfg.get("pool_size", 2))
    s = triple(cfg.get("strides") or p)
    h = x.permute(0, 4, 1, 2, 3)
    f = torch.nn.functional
    if kind == "max":
        y = f.max_pool3d(same_padded3d(cfg, h, p, s, [1] * 3, value=float("-inf")), p, s)
    else:
        total = f.avg_pool3d(same_padded3d(cfg, h, p, s, [1] * 3), p, s, divisor_override=1)
        cells = f.avg_pool3d(same_padded3d(cfg, torch.ones_like(h), p, s, [1] * 3), p, s,
                             divisor_override=1)
        y = total / cells
    return y.permute(0, 2, 3, 4, 1)


def pool1d(cfg, x, kind):
    p = one(cfg.get("pool_size", 2))
    s = one(cfg.get("strides") or p)
    h = x.permute(0, 2, 1)
    if kind == "max":
        y = torch.nn.functional.max_pool1d(h, p, s)
    else:
        y = torch.nn.functional.avg_pool1d(h, p, s)
    return y.permute(0, 2, 1)


def activation(name, x):
    f = torch.nn.functional
    table = {
        "linear": lambda v: v, "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
        "leaky_relu": lambda v: f.leaky_relu(v, 0.2), "hard_sigmoid": f.hardsigmoid,
        "hard_swish": f.hardswish, "mish": f.mish, "log_softmax": lambda v: f.log_softmax(v, -1),
        "softmax": lambda v: torch.softmax(v, -1), "elu": f.elu, "gelu": f.gelu,
        "softsign": f.softsign,
    }
    return table[name](x)


def conv_tf(x, kernel, padding, k, s, d):
    """TensorFlow's convolution (SAME or VALID) of channels-first x (N, C, spatial...) with a
    Keras kernel (k..., in, out), over 1, 2 or 3 spatial axes; no bias."""
    rank = x.dim() - 2
    if padding == "same":
        pads = []
        for a in reversed(range(rank)):  # F.pad lists the last axis first
            pads += tf_same_pads(x.shape[2 + a], k[a], s[a], d[a])
        x = torch.nn.functional.pad(x, pads)
    convolve = [None, torch.nn.functional.conv1d, torch.nn.functional.conv2d,
                torch.nn.functional.conv3d][rank]
    return convolve(x, kernel.permute(rank + 1, rank, *range(rank)), None, stride=s, dilation=d)


def conv_lstm(cfg, x, w, rank, initial=()):
    """Keras' ConvLSTM1D/2D/3D from its cell's formulas: gates (i, f, c, o) = conv(x_t, kernel)
    + bias + conv(h, recurrent_kernel) (strides 1, SAME), c = f c + i g, h = o act(c), from zero
    states or the given h and c (channels last); go_backwards steps in reverse and returns the
    outputs in that order."""
    sizes = lambda v: list(v) if isinstance(v, list) else [v] * rank
    k, s = sizes(cfg["kernel_size"]), sizes(cfg.get("strides", 1))
    d = sizes(cfg.get("dilation_rate", 1))
    act = lambda v: activation(cfg.get("activation", "tanh"), v)
    gate = lambda v: activation(cfg.get("recurrent_activation", "sigmoid"), v)
    first, last = (0, rank + 1, *range(1, rank + 1)), (0, *range(2, rank + 2), 1)
    steps = range(x.shape[1] - 1, -1, -1) if cfg.get("go_backwards") else range(x.shape[1])
    h = c = None
    if len(initial) == 2:
        h, c = (state.permute(*first) for state in initial)
    outputs = []
    for t in steps:
        z = conv_tf(x[:, t].permute(*first), w["conv_lstm_cell/kernel"],
                    cfg.get("padding", "valid"), k, s, d)
        if "conv_lstm_cell/bias" in w:
            z = z + w["conv_lstm_cell/bias"].reshape(1, -1, *[1] * rank)
        if h is None:
            h = torch.zeros(z.shape[0], z.shape[1] // 4, *z.shape[2:])
            c = torch.zeros_like(h)
        z = z + conv_tf(h, w["conv_lstm_cell/recurrent_kernel"], "same", k, [1] * rank,
                        [1] * rank)
        i, f, g, o = z.chunk(4, dim=1)
        c = gate(f) * c + gate(i) * act(g)
        h = gate(o) * act(c)
        outputs.append(h.permute(*last))
    y = torch.stack(outputs, 1) if cfg.get("return_sequences") else outputs[-1]
    if not cfg.get("return_state"):
        return y
    # The output, then the final h and c, each sample's values flattened (Tandem's packing).
    rows = x.shape[0]
    return torch.cat([y.reshape(rows, -1), h.permute(*last).reshape(rows, -1),
                      c.permute(*last).reshape(rows, -1)], dim=1)


def recurrent(cls, cfg, x, w, mask=None, initial=()):
    """Keras' SimpleRNN, LSTM and GRU (reset_after): torch.nn.RNN / LSTM / GRU run with the Keras
    weights (transposed; the GRU's gates reordered from Keras' z, r, h to torch's r, z, n) where
    the activations are torch's, else Keras' cell formulas stepped by hand. go_backwards: the
    input reversed in time, the outputs in processing order, as Keras returns them."""
    prefix = {"SimpleRNN": "simple_rnn_cell", "LSTM": "lstm_cell", "GRU": "gru_cell"}[cls]
    kernel, rec = w[prefix + "/kernel"], w[prefix + "/recurrent_kernel"]
    bias = w.get(prefix + "/bias")
    units = cfg["units"]
    act = cfg.get("activation", "tanh")
    ract = cfg.get("recurrent_activation", "sigmoid")
    stepped = (cls == "GRU" and not cfg.get("reset_after", True)) or cfg.get("return_state") \
        or len(initial) > 0  # Keras' RNN loop stepped by hand, the states in and out
    if stepped:
        mask = mask if mask is not None else torch.ones(x.shape[0], x.shape[1])
    if mask is not None:
        return masked_recurrent(cls, cfg, x, kernel, rec, bias, units, act, ract, mask, initial)
    if cfg.get("go_backwards", False):
        x = x.flip(1)
    torch_acts = act == "tanh" and (cls == "SimpleRNN" or ract == "sigmoid")
    if torch_acts or (cls == "SimpleRNN" and act == "relu"):
        ys = torch_recurrent(cls, x, kernel, rec, bias, units, act)
    else:
        ys = keras_recurrent(cls, x, kernel, rec, bias, units, act, ract)
    return ys if cfg.get("return_sequences", False) else ys[:, -1]


def bidirectional(cfg, x, w, mask=None, initial=()):
    """Keras' Bidirectional: the layer forwards, a copy with go_backwards turned over, the
    copy's outputs put back in step order with return_sequences, then the merge. The forward
    layer starts from the first half of `initial`, the backward one from the second; with
    return_state the merged output is followed by the forward layer's final states, then the
    backward layer's (packed as Tandem packs them)."""
    inner = cfg["layer"]
    cls, config = inner["class_name"], dict(inner["config"])
    over_cell = cls == "RNN"
    if over_cell:  # an RNN over one cell: the cell's layer, the RNN's keys beside the cell's
        cell = config.pop("cell")
        cls = cell["class_name"][: -len("Cell")]
        config = dict(cell["config"], **config)
    back = dict(cfg.get("backward_layer", {}).get("config", config))
    if "backward_layer" not in cfg:
        back["go_backwards"] = not config.get("go_backwards", False)
    for layer in (config, back):  # Keras forces it on both layers
        layer["zero_output_for_mask"] = layer.get("return_sequences", False)
    cell_prefix = {"SimpleRNN": "simple_rnn_cell", "LSTM": "lstm_cell", "GRU": "gru_cell"}[cls]
    strip = lambda prefix: {(cell_prefix + k[k.rindex("/"):] if over_cell else k[len(prefix):]): v
                            for k, v in w.items() if k.startswith(prefix)}
    named = lambda prefix, n: (n if n.startswith(prefix) else prefix + n) + "/"
    half = len(initial) // 2
    ahead = recurrent(cls, config, x, strip(named("forward_", config["name"])), mask,
                      initial[:half])
    behind = recurrent(cls, back, x, strip(named("backward_", back["name"])), mask,
                       initial[half:])
    states = []
    if config.get("return_state", False):  # each packed: its output, then its states
        width = config["units"] * (2 if cls == "LSTM" else 1)
        states = [ahead[:, -width:], behind[:, -width:]]
        shape = (x.shape[0], x.shape[1], -1) if config.get("return_sequences", False) else \
            (x.shape[0], -1)
        ahead, behind = ahead[:, :-width].reshape(shape), behind[:, :-width].reshape(shape)
    if config.get("return_sequences", False):
        behind = behind.flip(1)
    merge = cfg.get("merge_mode", "concat")
    merged = {"concat": lambda: torch.cat([ahead, behind], dim=-1), "sum": lambda: ahead + behind,
              "ave": lambda: (ahead + behind) / 2, "mul": lambda: ahead * behind}[merge]()
    if not states:
        return merged
    return torch.cat([merged.reshape(x.shape[0], -1)] + states, dim=1)


def torch_cell(cls, units, act, ract, kernel, rec, bias, reset_after=True):
    """One step of the cell as a function (x, (h, c)) -> (h, c): torch's own cell functions with
    the Keras weights mapped where the activations are torch's, else Keras' formulas (always for
    a GRU with reset_after false, which torch's GRU is not: the reset gate on h before the
    recurrent kernel, one bias)."""
    u = units
    if cls == "GRU" and not reset_after:
        a, ra = (lambda v: activation(act, v)), (lambda v: activation(ract, v))

        def reset_before_step(x, hc):
            h, c = hc
            xw = x @ kernel + (0 if bias is None else bias)
            z = ra(xw[:, :u] + h @ rec[:, :u])
            r = ra(xw[:, u:2 * u] + h @ rec[:, u:2 * u])
            hh = a(xw[:, 2 * u:] + (r * h) @ rec[:, 2 * u:])
            return z * h + (1 - z) * hh, c
        return reset_before_step
    if cls == "GRU":
        order = lambda m: torch.cat([m[..., u:2 * u], m[..., :u], m[..., 2 * u:]], dim=-1)
    else:
        order = lambda m: m
    zeros = torch.zeros(kernel.shape[1])
    b_ih = zeros if bias is None else order(bias[0] if cls == "GRU" else bias)
    b_hh = zeros if bias is None or cls != "GRU" else order(bias[1])
    w_ih, w_hh = order(kernel).t(), order(rec).t()
    if act == "tanh" and (cls == "SimpleRNN" or ract == "sigmoid"):
        if cls == "LSTM":
            return lambda x, hc: torch.lstm_cell(x, hc, w_ih, w_hh, b_ih, b_hh)
        if cls == "GRU":
            return lambda x, hc: (torch.gru_cell(x, hc[0], w_ih, w_hh, b_ih, b_hh), hc[1])
        return lambda x, hc: (torch.rnn_tanh_cell(x, hc[0], w_ih, w_hh, b_ih, b_hh), hc[1])
    if cls == "SimpleRNN" and act == "relu":
        return lambda x, hc: (torch.rnn_relu_cell(x, hc[0], w_ih, w_hh, b_ih, b_hh), hc[1])
    a, ra = (lambda v: activation(act, v)), (lambda v: activation(ract, v))

    def keras_step(x, hc):
        h, c = hc
        xw = x @ kernel + (0 if bias is None else (bias[0] if cls == "GRU" else bias))
        inner = h @ rec + (bias[1] if cls == "GRU" and bias is not None else 0)
        if cls == "SimpleRNN":
            return a(xw + inner), c
        if cls == "LSTM":
            z = xw + inner
            i, f, g, o = ra(z[:, :u]), ra(z[:, u:2 * u]), a(z[:, 2 * u:3 * u]), ra(z[:, 3 * u:])
            c = f * c + i * g
            return o * a(c), c
        zg = ra(xw[:, :u] + inner[:, :u])
        r = ra(xw[:, u:2 * u] + inner[:, u:2 * u])
        return zg * h + (1 - zg) * a(xw[:, 2 * u:] + r * inner[:, 2 * u:]), c
    return keras_step


def masked_recurrent(cls, cfg, x, kernel, rec, bias, units, act, ract, mask, initial=()):
    """Keras' RNN over masked steps (its backends' rnn(), unroll False): a masked step keeps the
    states, its output the previous state (zeros with zero_output_for_mask); go_backwards reads
    the steps from the last and returns the outputs in that order. The states start from
    `initial` (h, and the LSTM's c) when given, else zeros; with return_state the output is
    followed by the final states, each sample's values flattened and concatenated in Keras'
    order (how Tandem packs a layer's several outputs)."""
    step = torch_cell(cls, units, act, ract, kernel, rec, bias, cfg.get("reset_after", True))
    batch, steps = x.shape[0], x.shape[1]
    h = initial[0] if len(initial) > 0 else torch.zeros(batch, units)
    c = initial[1] if len(initial) > 1 else torch.zeros(batch, units)
    order = range(steps - 1, -1, -1) if cfg.get("go_backwards", False) else range(steps)
    outputs = []
    for t in order:
        keep = mask[:, t:t + 1] > 0
        h_new, c_new = step(x[:, t], (h, c))
        h_out = torch.where(keep, h_new, torch.zeros_like(h_new)
                            if cfg.get("zero_output_for_mask", False) else h)
        h = torch.where(keep, h_new, h)
        c = torch.where(keep, c_new, c)
        outputs.append(h_out)
    ys = torch.stack(outputs, dim=1)
    y = ys if cfg.get("return_sequences", False) else ys[:, -1]
    if not cfg.get("return_state", False):
        return y
    states = [h, c] if cls == "LSTM" else [h]
    return torch.cat([y.reshape(batch, -1)] + states, dim=1)


def check_masked_reference_against_packed_sequences():
    """The masked reference above against torch's packed sequences (padding at the end): the
    last output of an LSTM whose padded steps are masked is torch's h_n of the packed batch."""
    g = torch.Generator().manual_seed(3)
    kernel, rec = torch.randn(4, 12, generator=g), torch.randn(3, 12, generator=g)
    bias = torch.randn(12, generator=g)
    x = torch.randn(2, 5, 4, generator=g)
    lengths = [5, 2]
    mask = torch.tensor([[1.0] * 5, [1.0, 1.0, 0, 0, 0]])
    ours = masked_recurrent("LSTM", {}, x, kernel, rec, bias, 3, "tanh", "sigmoid", mask)
    lstm = torch.nn.LSTM(4, 3, batch_first=True)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(kernel.t())
        lstm.weight_hh_l0.copy_(rec.t())
        lstm.bias_ih_l0.copy_(bias)
        lstm.bias_hh_l0.zero_()
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
    _, (h_n, _) = lstm(packed)
    if not torch.allclose(ours, h_n[0], atol=1e-6):
        print("keras_torch.py: the masked reference disagrees with torch's packed LSTM",
              file=sys.stderr)
        sys.exit(5)


def torch_recurrent(cls, x, kernel, rec, bias, units, act):
    u = units
    if cls == "GRU":  # Keras z, r, h -> torch r, z, n
        order = lambda m: torch.cat([m[..., u:2 * u], m[..., :u], m[..., 2 * u:]], dim=-1)
        kernel, rec = order(kernel), order(rec)
        if bias is not None:
            bias = order(bias)
    zeros = torch.zeros(kernel.shape[1])
    if bias is None:
        b_ih, b_hh = zeros, zeros
    elif cls == "GRU":
        b_ih, b_hh = bias[0], bias[1]
    else:
        b_ih, b_hh = bias, zeros
    # The functions torch.nn.RNN / LSTM / GRU call with their flat weights (a module's forward
    # reads its own parameters' list, which functional_call does not replace in this torch).
    weights = [kernel.t(), rec.t(), b_ih, b_hh]
    h0 = torch.zeros(1, x.shape[0], u)
    if cls == "LSTM":
        ys, _, _ = torch._VF.lstm(x, (h0, h0), weights, True, 1, 0.0, False, False, True)
    else:
        run = {"GRU": torch._VF.gru, "SimpleRNN": torch._VF.rnn_tanh if act == "tanh"
               else torch._VF.rnn_relu}[cls]
        ys, _ = run(x, h0, weights, True, 1, 0.0, False, False, True)
    return ys


def keras_recurrent(cls, x, kernel, rec, bias, units, act, ract):
    a, ra = (lambda v: activation(act, v)), (lambda v: activation(ract, v))
    u = units
    batch, steps = x.shape[0], x.shape[1]
    h = torch.zeros(batch, u)
    c = torch.zeros(batch, u)
    input_bias = bias[0] if cls == "GRU" and bias is not None else bias
    ys = []
    for t in range(steps):
        xw = x[:, t] @ kernel
        if input_bias is not None:
            xw = xw + input_bias
        inner = h @ rec
        if cls == "GRU" and bias is not None:
            inner = inner + bias[1]
        if cls == "SimpleRNN":
            h = a(xw + inner)
        elif cls == "LSTM":
            z = xw + inner
            i, f, g, o = ra(z[:, :u]), ra(z[:, u:2 * u]), a(z[:, 2 * u:3 * u]), ra(z[:, 3 * u:])
            c = f * c + i * g
            h = o * a(c)
        else:
            zg = ra(xw[:, :u] + inner[:, :u])
            r = ra(xw[:, u:2 * u] + inner[:, u:2 * u])
            hh = a(xw[:, 2 * u:] + r * inner[:, 2 * u:])
            h = zg * h + (1 - zg) * hh
        ys.append(h)
    return torch.stack(ys, dim=1)


def rnn_over_cell(cfg, x, weights, mask=None, initial=()):
    """Keras' RNN over one cell: the cell's layer, the cell's weights renamed."""
    cell = cfg["cell"]
    inner = cell["class_name"][: -len("Cell")]
    merged = dict(cell["config"], **{k: v for k, v in cfg.items() if k != "cell"})
    prefix = {"SimpleRNN": "simple_rnn_cell", "LSTM": "lstm_cell", "GRU": "gru_cell"}[inner]
    renamed = {prefix + name[name.rindex("/"):]: w for name, w in weights.items()}
    return recurrent(inner, merged, x, renamed, mask, initial)


def stacked_cells(cfg, x, weights, mask=None):
    """Keras' RNN over StackedRNNCells, as Keras' loop steps it: per step each cell on the step's
    output of the cell below, a masked step keeping every cell's states; the output the last
    cell's (every step's in processing order with return_sequences)."""
    cells = cfg["cell"]["config"]["cells"]
    stack = cfg["cell"]["config"].get("name", "stacked_rnn_cells")
    if mask is None:
        mask = torch.ones(x.shape[0], x.shape[1])
    if cfg.get("go_backwards"):
        x, mask = x.flip(1), mask.flip(1)
    states = [None] * len(cells)
    outputs, last = [], None
    for t in range(x.shape[1]):
        h = x[:, t]
        keep = mask[:, t:t + 1]
        for i, cell in enumerate(cells):
            own = {n: w for n, w in weights.items()
                   if n.startswith(f"{stack}/{cell['config']['name']}/")}
            step = {"cell": cell, "return_sequences": False, "return_state": True}
            given = () if states[i] is None else states[i]
            y = rnn_over_cell(step, h[:, None], own, None, given)
            units = cell["config"]["units"]
            new = [y[:, units * (k + 1): units * (k + 2)] for k in range(len(y[0]) // units - 1)]
            old = states[i] if states[i] is not None else [torch.zeros_like(s) for s in new]
            states[i] = [keep * n + (1 - keep) * o for n, o in zip(new, old)]
            h = states[i][0]
        last = h if last is None else keep * h + (1 - keep) * last
        outputs.append(last)
    return torch.stack(outputs, 1) if cfg.get("return_sequences") else outputs[-1]


def batch_norm(cfg, x, w, training, mask):
    """Keras' BatchNormalization over the last axis. In training the batch's statistics: torch's
    own batch_norm, or with a Keras mask of the steps (batch, steps) Keras 3's masked moments —
    mean Σ m·x / Σ m and biased variance Σ m·(x - mean)² / Σ m over the batch and the steps —,
    every step normalized with them. Else the moving statistics."""
    eps = cfg.get("epsilon", 1e-3)
    gamma, beta = w.get("gamma"), w.get("beta")
    if training and mask is None:
        channels_first = x.reshape(-1, x.shape[-1])
        return torch.nn.functional.batch_norm(channels_first, None, None, gamma, beta,
                                              training=True, eps=eps).reshape(x.shape)
    if training:
        m = mask.reshape(*mask.shape, *([1] * (x.dim() - mask.dim())))
        axes = tuple(range(x.dim() - 1))
        count = m.expand_as(x).sum(dim=axes)
        mean = (m * x).sum(dim=axes) / count
        var = (m * (x - mean) ** 2).sum(dim=axes) / count
    else:
        mean, var = w["moving_mean"], w["moving_variance"]
    y = (x - mean) / torch.sqrt(var + eps)
    return y * (gamma if gamma is not None else 1) + (beta if beta is not None else 0)


def forward(case, inputs, weights):
    cls, cfg, options = case["class_name"], case["config"], case.get("options", {})
    if cls == "TimeDistributed":  # the wrapped layer on each step of each sample as its own row
        x = inputs[case["inputs"][0]["name"]]
        inner = dict(case, class_name=cfg["layer"]["class_name"], config=cfg["layer"]["config"])
        y = forward(inner, {case["inputs"][0]["name"]: x.reshape(-1, *x.shape[2:])}, weights)
        return y.reshape(x.shape[0], x.shape[1], *y.shape[1:])
    xs = [inputs[i["name"]] for i in case["inputs"]]
    masks = {m["name"]: load(case["folder"], m).detach() for m in case.get("masks", [])}
    mask = masks.get("query")  # the first input's
    merge = elementwise(cls)
    if merge:
        return merge(xs)
    if cls == "Dot":
        axes = cfg["axes"] if isinstance(cfg["axes"], list) else [cfg["axes"], cfg["axes"]]
        a, b = xs
        axes = [ax if ax >= 0 else a.dim() + ax for ax in axes]
        if cfg.get("normalize"):  # cosine proximity: each input L2-normalized along its axis
            a = torch.nn.functional.normalize(a, dim=axes[0], eps=1e-7)
            b = torch.nn.functional.normalize(b, dim=axes[1], eps=1e-7)
        if a.dim() == 2:  # (batch, n) . (batch, n) -> (batch, 1)
            return (a * b).sum(dim=1, keepdim=True)
        # batch_dot: contract a's axes[0] with b's axes[1]; free axes in order (a's, then b's)
        return torch.einsum("bij,bik->bjk" if axes == [1, 1] else
                            "bij,bkj->bik" if axes == [2, 2] else
                            "bij,bjk->bik" if axes == [2, 1] else "bij,bki->bjk", a, b)
    if cls == "Concatenate":
        return torch.cat(xs, dim=keras_axis(cfg.get("axis", -1), xs[0].dim()))
    if cls == "LayerNormalization":
        return layer_norm(cfg, xs, weights)
    if cls == "BatchNormalization":
        return batch_norm(cfg, xs[0], weights, case.get("training", False), mask)
    if cls == "RMSNormalization":
        return rms_norm(cfg, xs, weights)
    if cls == "GroupNormalization":  # torch's group_norm, channels moved first and back
        x = xs[0]
        channels = x.shape[-1]
        groups = cfg.get("groups", 32)
        groups = channels if groups == -1 else groups
        first = x.movedim(-1, 1)
        y = torch.nn.functional.group_norm(first, groups, weights.get("gamma"), weights.get("beta"),
                                           eps=cfg.get("epsilon", 1e-3))
        return y.movedim(1, -1)
    if cls in ("Attention", "AdditiveAttention"):  # on [query, value(, key)]
        q, v = xs[0], xs[1]
        k = xs[2] if len(xs) > 2 else v
        pairs = q[:, :, None, :] + k[:, None, :, :]  # (batch, Tq, Tv, dim): query + key
        if cls == "AdditiveAttention":  # Bahdanau: Σ scale[d] tanh(q[d] + k[d])
            terms = torch.tanh(pairs)
            if cfg.get("use_scale", True):
                terms = terms * weights["scale"]
            scores = terms.sum(dim=-1)
        elif cfg.get("score_mode", "dot") == "concat":  # c Σ tanh(scale (q[d] + k[d]))
            if cfg.get("use_scale", False):
                pairs = pairs * weights["scale"]
            scores = weights["concat_score_weight"] * torch.tanh(pairs).sum(dim=-1)
        else:  # Luong: q · k, times the scale
            scores = q @ k.transpose(1, 2)
            if cfg.get("use_scale", False):
                scores = scores * weights["scale"]
        keep = torch.ones_like(scores, dtype=torch.bool)
        value_mask = masks.get(case["inputs"][1]["name"])
        if value_mask is not None:
            keep = keep & (value_mask != 0)[:, None, :]
        if options.get("use_causal_mask", False):  # Keras: row index >= column index
            keep = keep & torch.ones(scores.shape[1], scores.shape[2]).tril().bool()
        out = torch.softmax(scores - 1e9 * (~keep).float(), dim=-1) @ v
        if mask is not None:  # the query's
            out = out * mask[..., None]
        return out
    if cls == "MultiHeadAttention":
        return multi_head_attention(cfg, inputs, weights, options, masks)
    if cls == "GroupedQueryAttention":
        return grouped_query_attention(cfg, inputs, weights, options, masks)
    if cls == "GlobalAveragePooling1D":
        if mask is not None:  # Keras: sum(x * mask) / sum(mask) over the steps
            m = mask.unsqueeze(-1)
            return (xs[0] * m).sum(dim=1, keepdim=bool(cfg.get("keepdims", False))) / m.sum(
                dim=1, keepdim=bool(cfg.get("keepdims", False)))
        return xs[0].mean(dim=1, keepdim=bool(cfg.get("keepdims", False)))
    if cls == "PositionEmbedding":  # keras_hub: the first `time` rows, broadcast over the batch
        x = xs[0]
        return weights["embeddings"][: x.shape[1]].expand(x.shape[0], -1, -1)
    if cls == "Activation":
        return activation(cfg["activation"], xs[0])
    if cls in ("ZeroPadding1D", "Cropping1D"):  # steps added as zeros or cut, (left, right)
        key = "padding" if cls == "ZeroPadding1D" else "cropping"
        left, right = cfg[key] if isinstance(cfg[key], list) else (cfg[key], cfg[key])
        x = xs[0]
        if cls == "ZeroPadding1D":
            return torch.nn.functional.pad(x, (0, 0, left, right))
        return x[:, left:x.shape[1] - right, :]
    if cls == "UpSampling1D":
        return xs[0].repeat_interleave(cfg["size"], dim=1)
    if cls == "RepeatVector":
        return xs[0].unsqueeze(1).expand(-1, cfg["n"], -1)
    if cls == "Permute":
        return xs[0].permute(0, *cfg["dims"])
    if cls == "EinsumDense":  # torch's einsum of Keras' equation; Keras' bias broadcasts alike
        return biased(cfg, torch.einsum(cfg["equation"], xs[0], weights["kernel"]), weights)
    if cls == "Dense":  # Keras' kernel is (in, out): x @ kernel on the last axis
        return biased(cfg, torch.nn.functional.linear(xs[0], weights["kernel"].t()), weights)
    if cls == "Conv2D":
        return biased(cfg, conv2d_tf(cfg, xs[0], weights["kernel"].permute(3, 2, 0, 1),
                                     cfg.get("groups", 1)), weights)
    if cls == "DepthwiseConv2D":
        return biased(cfg, depthwise(cfg, xs[0], weights), weights)
    if cls == "SeparableConv2D":
        pointwise = weights["pointwise_kernel"].permute(3, 2, 0, 1)
        y = depthwise(cfg, xs[0], weights)
        return biased(cfg, torch.nn.functional.conv2d(y.permute(0, 3, 1, 2), pointwise)
                      .permute(0, 2, 3, 1), weights)
    if cls == "UnitNormalization":  # x * rsqrt(max(sum of squares over the axes, 1e-12))
        x = xs[0]
        axis = cfg.get("axis", -1)
        axes = [keras_axis(a, x.dim()) for a in (axis if isinstance(axis, list) else [axis])]
        return x * torch.rsqrt(torch.clamp((x * x).sum(dim=axes, keepdim=True), min=1e-12))
    if cls == "Identity":
        return xs[0] * 1
    if cls == "CenterCrop":  # the centred window, or smart_resize where the image is smaller
        x, height, width = xs[0], cfg["height"], cfg["width"]
        rows, cols = x.shape[1], x.shape[2]
        if rows >= height and cols >= width:
            top, left = (rows - height) // 2, (cols - width) // 2
            return x[:, top:top + height, left:left + width]
        cls, cfg = "Resizing", dict(cfg, crop_to_aspect_ratio=True)
    if cls == "Resizing":  # tf.image.resize: half-pixel centres, no antialiasing
        x, height, width = xs[0], cfg["height"], cfg["width"]
        if cfg.get("crop_to_aspect_ratio", False):  # smart_resize's centred window
            rows, cols = x.shape[1], x.shape[2]
            keep_rows, keep_cols = min(rows, cols * height // width), min(cols, rows * width // height)
            top, left = (rows - keep_rows) // 2, (cols - keep_cols) // 2
            x = x[:, top:top + keep_rows, left:left + keep_cols]
        if cfg.get("pad_to_aspect_ratio", False):  # centred in the target's ratio, fill_value
            rows, cols = x.shape[1], x.shape[2]
            pad_rows, pad_cols = max(rows, cols * height // width), max(cols, rows * width // height)
            top, left = (pad_rows - rows) // 2, (pad_cols - cols) // 2
            x = torch.nn.functional.pad(
                x, (0, 0, left, pad_cols - cols - left, top, pad_rows - rows - top),
                value=float(cfg.get("fill_value", 0.0)))
        nearest = cfg.get("interpolation", "bilinear") == "nearest"
        y = torch.nn.functional.interpolate(
            x.permute(0, 3, 1, 2), size=(height, width),
            mode="nearest-exact" if nearest else "bilinear",
            **({} if nearest else {"align_corners": False}))
        return y.permute(0, 2, 3, 1)
    if cls in ("Conv2DTranspose", "Conv3DTranspose"):
        return conv2d_transpose(cfg, xs[0], weights)
    if cls == "Conv1DTranspose":  # Conv2DTranspose's arithmetic on one row, Keras' 1-D sizes
        one = lambda v: v[0] if isinstance(v, list) else v
        two = dict(cfg, kernel_size=[1, one(cfg["kernel_size"])],
                   strides=[1, one(cfg.get("strides", 1))],
                   dilation_rate=[1, one(cfg.get("dilation_rate", 1))],
                   output_padding=None if cfg.get("output_padding") is None
                   else [0, one(cfg["output_padding"])])
        row = dict(weights, kernel=weights["kernel"].unsqueeze(0))
        return conv2d_transpose(two, xs[0].unsqueeze(1), row).squeeze(1)
    if cls == "Conv1D":
        return conv1d(cfg, xs[0], weights)
    if cls == "DepthwiseConv1D":
        return biased(cfg, depthwise1d(cfg, xs[0], weights["depthwise_kernel"]), weights)
    if cls == "SeparableConv1D":  # the depthwise part, then pointwise (1, in * multiplier, filters)
        y = depthwise1d(cfg, xs[0], weights["depthwise_kernel"])
        return biased(cfg, y @ weights["pointwise_kernel"][0], weights)
    if cls == "MaxPooling1D":
        return pool1d(cfg, xs[0], "max")
    if cls == "AveragePooling1D":
        return pool1d(cfg, xs[0], "average")
    if cls == "GlobalMaxPooling1D":
        return xs[0].amax(dim=1, keepdim=bool(cfg.get("keepdims", False)))
    if cls.startswith("AdaptiveAveragePooling") or cls.startswith("AdaptiveMaxPooling"):
        # torch's adaptive pools (Keras 3's ops.adaptive_*_pool define the same windows), on
        # the channels moved first and back.
        axes = int(cls[-2])
        size = cfg["output_size"]
        size = tuple(size) if isinstance(size, list) else (size,) * axes
        kind = "max" if "Max" in cls else "avg"
        f = getattr(torch.nn.functional, f"adaptive_{kind}_pool{axes}d")
        y = f(xs[0].movedim(-1, 1), size[0] if axes == 1 else size)
        return (y[0] if kind == "max" and isinstance(y, tuple) else y).movedim(1, -1)
    if cls in ("ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"):
        return conv_lstm(cfg, xs[0], weights, int(cls[8]), xs[1:])
    if cls == "Conv3D":
        return conv3d(cfg, xs[0], weights)
    if cls == "MaxPooling3D":
        return pool3d(cfg, xs[0], "max")
    if cls == "AveragePooling3D":
        return pool3d(cfg, xs[0], "average")
    if cls in ("ZeroPadding3D", "Cropping3D"):  # ((before, after) of depth, rows, cols)
        key = "padding" if cls == "ZeroPadding3D" else "cropping"
        (d0, d1), (r0, r1), (c0, c1) = cfg[key]
        x = xs[0]
        if cls == "ZeroPadding3D":
            return torch.nn.functional.pad(x, (0, 0, c0, c1, r0, r1, d0, d1))
        return x[:, d0:x.shape[1] - d1, r0:x.shape[2] - r1, c0:x.shape[3] - c1, :]
    if cls == "UpSampling3D":
        y = xs[0]
        for axis, factor in enumerate(triple(cfg.get("size", 2))):
            y = y.repeat_interleave(factor, dim=1 + axis)
        return y
    if cls == "GlobalMaxPooling3D":
        return xs[0].amax(dim=(1, 2, 3), keepdim=bool(cfg.get("keepdims", False)))
    if cls == "GlobalAveragePooling3D":
        return xs[0].mean(dim=(1, 2, 3), keepdim=bool(cfg.get("keepdims", False)))
    if cls == "GlobalMaxPooling2D":
        return xs[0].amax(dim=(1, 2), keepdim=bool(cfg.get("keepdims", False)))
    if cls in ("ZeroPadding2D", "Cropping2D"):
        key = "padding" if cls == "ZeroPadding2D" else "cropping"
        (top, bottom), (left, right) = cfg[key]
        x = xs[0]
        if cls == "ZeroPadding2D":
            return torch.nn.functional.pad(x, (0, 0, left, right, top, bottom))
        return x[:, top:x.shape[1] - bottom, left:x.shape[2] - right, :]
    if cls == "UpSampling2D":
        rows, cols = cfg["size"]
        return xs[0].repeat_interleave(rows, dim=1).repeat_interleave(cols, dim=2)
    if cls == "Normalization":  # the config's statistics, or adapt()'s as weights
        if cfg["mean"] is None:
            mean, variance = weights["mean"], weights["variance"]
        else:
            mean = torch.tensor(cfg["mean"], dtype=torch.float32)
            variance = torch.tensor(cfg["variance"], dtype=torch.float32)
        deviation = torch.clamp(torch.sqrt(variance), min=1e-7)
        if cfg.get("invert", False):
            return mean + xs[0] * deviation
        return (xs[0] - mean) / deviation
    if cls == "Rescaling":
        return xs[0] * cfg["scale"] + cfg.get("offset", 0.0)
    if cls in ("ReLU", "LeakyReLU") and (cls == "LeakyReLU" or any(
            cfg.get(k) for k in ("max_value", "negative_slope", "threshold"))):
        slope = cfg.get("negative_slope", 0.3 if cls == "LeakyReLU" else 0.0)
        t = cfg.get("threshold", 0.0)
        x = xs[0]
        positive = torch.where(x > t, x, torch.zeros_like(x))
        if cfg.get("max_value") is not None:
            positive = torch.clamp(positive, 0.0, cfg["max_value"])
        return positive - slope * torch.relu(t - x)
    if cls == "ELU":
        return torch.nn.functional.elu(xs[0], alpha=cfg.get("alpha", 1.0))
    if cls == "PReLU":  # Keras: relu(x) - alpha * relu(-x), alpha broadcast over shared axes
        return torch.relu(xs[0]) - weights["alpha"] * torch.relu(-xs[0])
    if cls == "ReLU":
        return torch.relu(xs[0])
    if cls == "Softmax":
        return torch.softmax(xs[0], dim=-1)
    if cls in ("SimpleRNN", "LSTM", "GRU"):
        return recurrent(cls, cfg, xs[0], weights, mask, xs[1:])
    if cls == "RNN" and cfg["cell"]["class_name"] == "StackedRNNCells":
        return stacked_cells(cfg, xs[0], weights, mask)
    if cls == "RNN":
        return rnn_over_cell(cfg, xs[0], weights, mask, xs[1:])
    if cls == "Bidirectional":
        return bidirectional(cfg, xs[0], weights, mask, xs[1:])
    print(f"keras_torch.py: no PyTorch version of {cls}", file=sys.stderr)
    sys.exit(4)


def keras_loss(name, cfg, p, t):
    """Per-position losses (the last axis reduced), Keras 3's formulas written with torch
    operations; the caller takes their mean over every other axis, as Keras' reduction does."""
    eps = 1e-7
    f = torch.nn.functional
    if name == "huber":
        return f.huber_loss(p, t, reduction="none", delta=cfg.get("delta", 1.0)).mean(-1)
    if name in ("hinge", "squared_hinge"):
        label = torch.where(t == 0, -torch.ones_like(t), t)
        margin = torch.clamp(1 - label * p, min=0)
        return (margin if name == "hinge" else margin * margin).mean(-1)
    if name == "kl_divergence":
        tc, pc = torch.clamp(t, eps, 1), torch.clamp(p, eps, 1)
        return (tc * torch.log(tc / pc)).sum(-1)
    if name == "log_cosh":
        return torch.log(torch.cosh(p - t)).mean(-1)
    if name == "poisson":
        return (p - t * torch.log(p + eps)).mean(-1)
    if name == "categorical_crossentropy":
        if cfg.get("from_logits", False):
            return -(t * f.log_softmax(p, dim=-1)).sum(-1)
        q = torch.clamp(p / p.sum(-1, keepdim=True), eps, 1 - eps)
        return -(t * torch.log(q)).sum(-1)
    if name == "sparse_categorical_crossentropy":
        labels = t.long()
        if cfg.get("from_logits", False):  # torch's own: classes on axis 1, (N, C, d1, ...)
            return f.cross_entropy(p.movedim(-1, 1), labels, reduction="none")
        q = torch.clamp(p / p.sum(-1, keepdim=True), eps, 1 - eps)
        return -torch.log(q.gather(-1, labels.unsqueeze(-1)).squeeze(-1))
    if name == "cosine_similarity":
        # Keras 3's normalize: x * min(1 / |x|, 1 / epsilon)
        return -(f.normalize(t, dim=-1, eps=eps) * f.normalize(p, dim=-1, eps=eps)).sum(-1)
    print(f"keras_torch.py: no PyTorch version of loss {name}", file=sys.stderr)
    sys.exit(4)


def run_loss_case(folder, case):
    p = load(folder, case["pred"])
    t = load(folder, case["target"]).detach()
    loss = keras_loss(case["loss"], case.get("config", {}), p, t).mean()
    loss.backward()
    save(folder, "loss.bin", loss.reshape(1))
    save(folder, "dpred.bin", p.grad)


def keras_optimizer_step(name, cfg, w, g, slots, t):
    """One step of a Keras 3 optimizer, its rule written out in float32 torch (t from 1)."""
    lr = torch.tensor(cfg.get("learning_rate", 0.001), dtype=torch.float32)
    eps = cfg.get("epsilon", 1e-7)
    b1, b2 = cfg.get("beta_1", 0.9), cfg.get("beta_2", 0.999 if name != "Lion" else 0.99)
    if name == "Adagrad":
        slots[0] += g * g
        return w - lr * g / torch.sqrt(slots[0] + eps)
    if name == "Adadelta":
        rho = cfg.get("rho", 0.95)
        slots[0] = rho * slots[0] + (1 - rho) * g * g
        delta = -torch.sqrt(slots[1] + eps) * g / torch.sqrt(slots[0] + eps)
        slots[1] = rho * slots[1] + (1 - rho) * delta * delta
        return w + lr * delta
    if name == "Adamax":
        slots[0] += (g - slots[0]) * (1 - b1)
        slots[1] = torch.maximum(b2 * slots[1], torch.abs(g))
        return w - lr * slots[0] / ((1 - b1 ** t) * (slots[1] + eps))
    if name == "Nadam":
        u = lambda i: b1 * (1.0 - 0.5 * (0.96 ** i))
        product = 1.0
        for i in range(1, t + 1):
            product *= u(i)
        slots[0] += (g - slots[0]) * (1 - b1)
        slots[1] += (g * g - slots[1]) * (1 - b2)
        m_hat = u(t + 1) * slots[0] / (1 - product * u(t + 1)) + (1 - u(t)) * g / (1 - product)
        v_hat = slots[1] / (1 - b2 ** t)
        return w - m_hat * lr / (torch.sqrt(v_hat) + eps)
    if name == "Lion":
        w = w - lr * torch.sign(slots[0] * b1 + g * (1 - b1))
        slots[0] = slots[0] * b2 + g * (1 - b2)
        return w
    print(f"keras_torch.py: no PyTorch version of optimizer {name}", file=sys.stderr)
    sys.exit(4)


def sgd_with_moving_average(w, grads, cfg):
    """Keras' SGD with use_ema, from torch's own parts: torch.optim.SGD (at a constant rate Keras'
    m = mu m - lr g, w += m is torch's v = mu v + g, w -= lr v) and torch's AveragedModel with the
    exponential average as its avg_fn. AveragedModel copies the weights at its first update, as
    Keras 3's average starts (step 1); tf.keras 2's starts at the weights before the first step
    (its configs carry is_legacy_optimizer): one update before training. Every
    ema_overwrite_frequency steps the weights take the average; the end of fit takes it too."""
    from torch.optim.swa_utils import AveragedModel
    model = torch.nn.Module()
    model.w = torch.nn.Parameter(w.clone())
    m = cfg.get("ema_momentum", 0.99)
    average = AveragedModel(model, avg_fn=lambda a, p, n: m * a + (1 - m) * p)
    if "is_legacy_optimizer" in cfg:
        average.update_parameters(model)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.get("learning_rate", 0.01),
                          momentum=cfg.get("momentum", 0.0))
    every = cfg.get("ema_overwrite_frequency") or 0
    for t, g in enumerate(grads, start=1):
        model.w.grad = torch.tensor(g)
        opt.step()
        average.update_parameters(model)
        if every and t % every == 0:
            with torch.no_grad():
                model.w.copy_(average.module.w)
    return average.module.w.detach()


def run_optimizer_case(folder, case):
    """Steps over the gradients Tandem saw; with --torch-optim also torch.optim's own Adadelta."""
    w = load(folder, case["weights"]).detach()
    grads = np.fromfile(os.path.join(folder, case["grads"]["file"]), dtype="<f4").reshape(
        case["grads"]["shape"])
    name, cfg = case["optimizer"], case.get("config", {})
    if cfg.get("use_ema"):
        if name != "SGD":
            print(f"keras_torch.py: use_ema is checked with SGD, not {name}", file=sys.stderr)
            sys.exit(4)
        save(folder, "w_ema_torch.bin", sgd_with_moving_average(w, grads, cfg))
        return
    slots = [torch.full_like(w, cfg.get("initial_accumulator_value", 0.1) if name == "Adagrad"
                             else 0.0) for _ in range(2)]
    ours = w.clone()
    for t, g in enumerate(grads, start=1):
        ours = keras_optimizer_step(name, cfg, ours, torch.tensor(g), slots, t)
    save(folder, "w_keras.bin", ours)
    if name == "Adadelta":  # torch.optim's Adadelta is Keras' rule: a second, independent check
        p = torch.nn.Parameter(w.clone())
        opt = torch.optim.Adadelta([p], lr=cfg.get("learning_rate", 0.001),
                                   rho=cfg.get("rho", 0.95), eps=cfg.get("epsilon", 1e-7))
        for g in grads:
            p.grad = torch.tensor(g)
            opt.step()
        save(folder, "w_torch_optim.bin", p)


def main():
    check_masked_reference_against_packed_sequences()
    for folder in sys.argv[1:]:
        run_case(folder)


def run_case(folder):
    with open(os.path.join(folder, "case.json")) as f:
        case = json.load(f)
    case["folder"] = folder
    if "loss" in case:
        run_loss_case(folder, case)
        return
    if "optimizer" in case:
        run_optimizer_case(folder, case)
        return
    inputs = {}
    tensors = []
    for spec in case["inputs"]:
        t = load(folder, spec)
        inputs[spec["name"]] = t
        tensors.append(t)
    weights = {spec["name"]: load(folder, spec) for spec in case["weights"]}
    y = forward(case, inputs, weights)
    dy = load(folder, case["grad_output"]).detach()
    (y * dy).sum().backward()
    save(folder, "y.bin", y)
    for i, t in enumerate(tensors):
        save(folder, f"dinput{i}.bin", t.grad if t.grad is not None else torch.zeros_like(t))
    for j, spec in enumerate(case["weights"]):
        g = weights[spec["name"]].grad
        save(folder, f"dweight{j}.bin", g if g is not None else torch.zeros_like(weights[spec["name"]]))


if __name__ == "__main__":
    main()
