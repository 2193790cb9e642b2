"""Runs ONNX files exported by Tandem through code nobody here wrote: onnx.checker (full check,
with ONNX's shape inference) and OpenCV's DNN module, and compares OpenCV's outputs with the
outputs Tandem computed. Graphs OpenCV cannot run (attention, embeddings) go through NumPy
instead: each node by its operator's definition in the ONNX specification (float32, as ONNX
runtimes compute), which shares nothing with Tandem's C++ but the graph.

usage: onnx_runtime_check.py MANIFEST.json
The manifest is a list of cases: {"label", "onnx", "inputs": [{"name", "file", "shape"}],
"outputs": [{"file", "shape"}], "opencv": bool}; files hold float32 values, row-major.
Prints one JSON object: {label: {"checker": "ok" | error, "opencv": max abs difference over the
outputs | error text | null when not asked, "numpy": the same by NumPy for a case not run by
OpenCV ("unsupported: <operator>" when the graph uses one not below), "initializers": the
initializers' names}}.

OpenCV's Python binding reads a 3-D NumPy array as an image with channels; a 3-D input is
therefore given as 4-D with a trailing axis of 1 (the same values in the same order).
"""
import itertools
import json
import math
import sys

import numpy as np
import onnx
import onnx.numpy_helper


def load(entry):
    return np.fromfile(entry["file"], dtype=np.float32).reshape(entry["shape"])


def check(case):
    try:
        model = onnx.load(case["onnx"])
        onnx.checker.check_model(model, full_check=True)
        return "ok"
    except Exception as e:  # the message is the result
        return f"{type(e).__name__}: {e}"


def run_opencv(case):
    import cv2

    net = cv2.dnn.readNetFromONNX(case["onnx"])
    for entry in case["inputs"]:
        x = load(entry)
        if x.ndim == 3:
            x = x[..., None]
        net.setInput(x, entry["name"])
    names = [o.name for o in onnx.load(case["onnx"]).graph.output]
    got = net.forward(names)
    worst = 0.0
    for value, entry in zip(got, case["outputs"]):
        expected = load(entry)
        value = np.asarray(value).reshape(expected.shape)
        worst = max(worst, float(np.abs(value - expected).max()))
    return worst


def attribute(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def reshape(x, shape):
    shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape.astype(np.int64))]
    return x.reshape(shape)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def slice_(x, starts, ends, axes=None, steps=None):
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return x[tuple(index)]


def conv_transpose(node, x, w, b=None):
    """ConvTranspose (any number of spatial axes, group 1, no pads attribute): each input cell
    scatters its kernel, dilated, at stride steps; output_padding extends the end."""
    assert attribute(node, "group", 1) == 1 and attribute(node, "pads") is None
    k = x.ndim - 2
    stride = attribute(node, "strides", [1] * k)
    dilation = attribute(node, "dilations", [1] * k)
    extra = attribute(node, "output_padding", [0] * k)
    taps, cells = w.shape[2:], x.shape[2:]
    out = np.zeros((x.shape[0], w.shape[1]) + tuple(
        (cells[a] - 1) * stride[a] + (taps[a] - 1) * dilation[a] + 1 + extra[a]
        for a in range(k)), np.float32)
    for tap in itertools.product(*(range(t) for t in taps)):
        index = (slice(None), slice(None)) + tuple(
            slice(tap[a] * dilation[a], tap[a] * dilation[a] + (cells[a] - 1) * stride[a] + 1,
                  stride[a]) for a in range(k))
        out[index] += np.einsum("nc...,co->no...", x, w[(slice(None), slice(None)) + tap])
    return out if b is None else out + b.reshape((1, -1) + (1,) * k)


RNN_ACTIVATIONS = {
    "Tanh": np.tanh, "Sigmoid": lambda v: 1 / (1 + np.exp(-v)), "Relu": lambda v: np.maximum(v, 0),
    "Softsign": lambda v: v / (1 + np.abs(v)), "Softplus": lambda v: np.log1p(np.exp(v)),
    "HardSigmoid": lambda v: np.clip(0.2 * v + 0.5, 0, 1),
}


def tap_views(node, x, kernel, fill):
    """x (N, C, spatial...) padded by the node's `pads` with `fill`, and for each kernel tap in
    row-major order the strided view of the cells it reads for every output (N, C, out...)."""
    k = x.ndim - 2
    strides = attribute(node, "strides", [1] * k)
    dilations = attribute(node, "dilations", [1] * k)
    pads = attribute(node, "pads", [0] * (2 * k))
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(pads[:k], pads[k:])), constant_values=fill)
    out = [(padded.shape[2 + a] - (kernel[a] - 1) * dilations[a] - 1) // strides[a] + 1
           for a in range(k)]
    views = []
    for tap in itertools.product(*(range(size) for size in kernel)):
        index = [slice(None), slice(None)] + [
            slice(tap[a] * dilations[a], tap[a] * dilations[a] + (out[a] - 1) * strides[a] + 1,
                  strides[a]) for a in range(k)]
        views.append((tap, padded[tuple(index)]))
    return views


def conv(node, x, w, b=None):
    """Conv (any number of spatial axes, groups, dilations, explicit pads)."""
    groups = attribute(node, "group", 1)
    out_channels, per_group = w.shape[0], x.shape[1] // groups
    step = out_channels // groups
    y = None
    for tap, view in tap_views(node, x, list(w.shape[2:]), 0.0):
        for g in range(groups):
            part = np.einsum("nc...,oc->no...", view[:, g * per_group:(g + 1) * per_group],
                             w[(slice(g * step, (g + 1) * step), slice(None)) + tap])
            if y is None:
                y = np.zeros((x.shape[0], out_channels) + part.shape[2:], np.float64)
            y[:, g * step:(g + 1) * step] += part
    if b is not None:
        y += b.reshape((1, -1) + (1,) * (x.ndim - 2))
    return y.astype(np.float32)


def pool(node, x, kind):
    """MaxPool (padding never wins) and AveragePool (count_include_pad 0: padding left out)."""
    kernel = attribute(node, "kernel_shape")
    if kind == "max":
        return np.max([v for _, v in tap_views(node, x, kernel, -np.inf)], axis=0)
    assert attribute(node, "count_include_pad", 0) == 0
    total = np.sum([v for _, v in tap_views(node, x, kernel, 0.0)], axis=0)
    cells = np.sum([v for _, v in tap_views(node, np.ones_like(x), kernel, 0.0)], axis=0)
    return total / cells


def resize(node, x, roi, scales, sizes=None):
    """Resize as the specification defines it, axis by axis: the output size from `sizes` (or
    `scales`), each output index mapped to a source coordinate (asymmetric: i / scale;
    half_pixel: (i + 0.5) / scale - 0.5), then nearest (floor, or round_prefer_ceil: floor(v +
    0.5)) or linear between the two pixels around it, coordinates clamped to the axis."""
    mode = attribute(node, "mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    coords = attribute(node, "coordinate_transformation_mode", b"half_pixel")
    coords = coords.decode() if isinstance(coords, bytes) else coords
    rounding = attribute(node, "nearest_mode", b"round_prefer_floor")
    rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
    out_sizes = [int(v) for v in sizes] if sizes is not None and len(sizes) else \
        [int(math.floor(n * float(s))) for n, s in zip(x.shape, scales)]
    for axis, (n, m) in enumerate(zip(x.shape, out_sizes)):
        if n == m:
            continue
        scale = m / n
        i = np.arange(m, dtype=np.float64)
        src = i / scale if coords == "asymmetric" else (i + 0.5) / scale - 0.5
        if mode == "nearest":
            picked = np.floor(src) if rounding == "floor" else np.floor(src + 0.5)
            x = np.take(x, np.clip(picked, 0, n - 1).astype(np.int64), axis=axis)
            continue
        assert mode == "linear", mode
        src = np.clip(src, 0, n - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n - 1)
        shape = [1] * x.ndim
        shape[axis] = m
        w = (src - lo).reshape(shape).astype(np.float32)
        x = np.take(x, lo, axis=axis) * (1 - w) + np.take(x, hi, axis=axis) * w
    return x


def recurrent(node, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None):
    """RNN, LSTM and GRU as the specification writes them: direction forward or bidirectional
    (the reverse half reads the steps from the last, its Y row t the state after step t), the
    states from initial_h (and initial_c) [directions, batch, hidden] or zeros, no sequence
    lengths; outputs Y [seq, directions, batch, hidden], Y_h (and Y_c), the final states
    [directions, batch, hidden], as many as the node names. Gates: LSTM
    i, o, f, c; GRU z, r, h (linear_before_reset 1: the reset gate times (R_h h + Rb_h); 0: the
    reset gate on h before R_h)."""
    direction = attribute(node, "direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    assert direction in ("forward", "bidirectional"), direction
    hidden = attribute(node, "hidden_size")
    names = [a.decode() if isinstance(a, bytes) else a for a in attribute(node, "activations", [])]
    op = node.op_type
    per = {"RNN": 1, "LSTM": 3, "GRU": 2}[op]
    defaults = {"RNN": ["Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}
    gates = w.shape[1] // hidden
    b = np.zeros((w.shape[0], 2 * gates * hidden), np.float32) if b is None else b
    assert sequence_lens is None, "sequence_lens"
    out = np.zeros((x.shape[0], w.shape[0], x.shape[1], hidden), np.float32)
    final_h = np.zeros((w.shape[0], x.shape[1], hidden), np.float32)
    final_c = np.zeros_like(final_h)
    for d in range(w.shape[0]):
        f = [RNN_ACTIVATIONS[n] for n in (names[d * per:(d + 1) * per] or defaults[op])]
        wd, rd = w[d], r[d]
        wb, rb = b[d, :gates * hidden], b[d, gates * hidden:]
        h = np.zeros((x.shape[1], hidden), np.float32) if initial_h is None else initial_h[d]
        c = np.zeros_like(h) if initial_c is None else initial_c[d]
        split = lambda v: [v[:, k * hidden:(k + 1) * hidden] for k in range(gates)]
        steps = range(x.shape[0]) if d == 0 else reversed(range(x.shape[0]))
        for t in steps:
            if op == "RNN":
                h = f[0](x[t] @ wd.T + h @ rd.T + wb + rb)
            elif op == "LSTM":
                i, o, fg, cc = split(x[t] @ wd.T + h @ rd.T + wb + rb)
                c = f[0](fg) * c + f[0](i) * f[1](cc)
                h = f[0](o) * f[2](c)
            else:
                xz, xr, xh = split(x[t] @ wd.T + wb)
                hz, hr, hh = split(h @ rd.T + rb)
                z, rr = f[0](xz + hz), f[0](xr + hr)
                if attribute(node, "linear_before_reset", 0) == 1:
                    candidate = f[1](xh + rr * hh)
                else:  # the reset gate on h before R_h: (r ⊙ h) R_h + Rb_h
                    candidate = f[1](xh + (rr * h) @ rd[2 * hidden:].T + rb[2 * hidden:])
                h = (1 - z) * candidate + z * h
            out[t, d] = h
        final_h[d], final_c[d] = h, c
    return (out, final_h, final_c)[:len(node.output)]


ONNX_TO_NUMPY = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.BOOL: np.bool_,
                 onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}

# Opset 13's operators as the specification defines them (inputs, then the node).
OPERATORS = {
    "Add": lambda n, a, b: a + b,
    "Sub": lambda n, a, b: a - b,
    "Mul": lambda n, a, b: a * b,
    "Div": lambda n, a, b: a / b,
    "MatMul": lambda n, a, b: np.matmul(a, b),
    "Einsum": lambda n, *xs: np.einsum(attribute(n, "equation").decode(), *xs),
    "Gemm": lambda n, a, b, c=None: attribute(n, "alpha", 1.0) * np.matmul(
        a.T if attribute(n, "transA", 0) else a, b.T if attribute(n, "transB", 0) else b)
        + (0 if c is None else attribute(n, "beta", 1.0) * c),
    "Sqrt": lambda n, x: np.sqrt(x),
    "Relu": lambda n, x: np.maximum(x, 0),
    "Tanh": lambda n, x: np.tanh(x),
    "Sigmoid": lambda n, x: 1 / (1 + np.exp(-x)),
    "Max": lambda n, *xs: np.maximum.reduce(np.broadcast_arrays(*xs)),
    "Erf": lambda n, x: np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype),
    "Greater": lambda n, a, b: a > b,
    "GreaterOrEqual": lambda n, a, b: a >= b,
    "Less": lambda n, a, b: a < b,
    "Equal": lambda n, a, b: a == b,
    "Mod": lambda n, a, b: np.fmod(a, b) if attribute(n, "fmod", 0) else np.mod(a, b),
    "Not": lambda n, x: np.logical_not(x),
    "Flatten": lambda n, x: x.reshape(int(np.prod(x.shape[:attribute(n, "axis", 1)])), -1),
    "ReduceMax": lambda n, x: x.max(axis=tuple(attribute(n, "axes")),
                                    keepdims=bool(attribute(n, "keepdims", 1))),
    "ReduceMin": lambda n, x: x.min(axis=tuple(attribute(n, "axes")),
                                    keepdims=bool(attribute(n, "keepdims", 1))),
    "Identity": lambda n, x: x,
    "Clip": lambda n, x, lo=None, hi=None: np.clip(x, lo, hi),
    "Cast": lambda n, x: x.astype(ONNX_TO_NUMPY[attribute(n, "to")]),
    "Transpose": lambda n, x: np.transpose(x, attribute(n, "perm")),
    "Reshape": lambda n, x, shape: reshape(x, shape),
    "Unsqueeze": lambda n, x, axes: np.expand_dims(x, tuple(int(a) for a in axes)),
    "Squeeze": lambda n, x, axes: np.squeeze(x, tuple(int(a) for a in axes)),
    "Softmax": lambda n, x: softmax(x, attribute(n, "axis", -1)),
    "ReduceProd": lambda n, x: x.prod(axis=tuple(attribute(n, "axes")),
                                      keepdims=bool(attribute(n, "keepdims", 1))),
    "Concat": lambda n, *xs: np.concatenate(xs, axis=attribute(n, "axis")),
    "ReduceMean": lambda n, x: x.mean(axis=tuple(attribute(n, "axes")),
                                      keepdims=bool(attribute(n, "keepdims", 1))),
    "ReduceSum": lambda n, x, axes: x.sum(axis=tuple(int(a) for a in axes),
                                          keepdims=bool(attribute(n, "keepdims", 1))),
    "Gather": lambda n, x, i: np.take(x, i, axis=attribute(n, "axis", 0)),
    "Shape": lambda n, x: np.array(x.shape, dtype=np.int64),
    "Expand": lambda n, x, shape: x * np.ones(shape.astype(np.int64), dtype=x.dtype),
    "Slice": lambda n, x, *rest: slice_(x, *rest),
    "Pad": lambda n, x, pads, value=None: np.pad(
        x, list(zip(pads[:x.ndim], pads[x.ndim:])), constant_values=0 if value is None else value),
    "Resize": resize,
    "ConvTranspose": conv_transpose,
    "Conv": conv,
    "MaxPool": lambda n, x: pool(n, x, "max"),
    "AveragePool": lambda n, x: pool(n, x, "average"),
    "GlobalMaxPool": lambda n, x: x.max(axis=tuple(range(2, x.ndim)), keepdims=True),
    "GlobalAveragePool": lambda n, x: x.mean(axis=tuple(range(2, x.ndim)), keepdims=True),
    "RNN": recurrent,
    "LSTM": recurrent,
    "GRU": recurrent,
}


def run_numpy(case):
    model = onnx.load(case["onnx"])
    for node in model.graph.node:
        if node.op_type not in OPERATORS:
            return "unsupported: " + node.op_type
    values = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for entry in case["inputs"]:
        values[entry["name"]] = load(entry)
    for node in model.graph.node:
        args = [values[name] if name else None for name in node.input]
        result = OPERATORS[node.op_type](node, *args)
        for name, value in zip(node.output, result if isinstance(result, tuple) else (result,)):
            values[name] = np.asarray(value)
    worst = 0.0
    for output, entry in zip(model.graph.output, case["outputs"]):
        expected = load(entry)
        value = values[output.name].astype(np.float32).reshape(expected.shape)
        worst = max(worst, float(np.abs(value - expected).max()))
    return worst


def main():
    cases = json.load(open(sys.argv[1]))
    results = {}
    for case in cases:
        result = {"checker": check(case), "opencv": None, "numpy": None,
                  "initializers": [t.name for t in onnx.load(case["onnx"]).graph.initializer]}
        if case.get("opencv"):
            try:
                result["opencv"] = run_opencv(case)
            except Exception as e:
                result["opencv"] = f"{type(e).__name__}: {str(e)[-600:]}"
        else:
            try:
                result["numpy"] = run_numpy(case)
            except Exception as e:
                result["numpy"] = f"{type(e).__name__}: {str(e)[-600:]}"
        results[case["label"]] = result
    print(json.dumps(results))


if __name__ == "__main__":
    main()
