#!/usr/bin/python3
"""PyTorch side of the oracle tests (tests/oracle/fashion_oracle_test.cpp).

Rebuilds a Tandem Sequential model — InputLayer, Reshape, Flatten, Dense, Conv2D, MaxPooling2D,
with relu/linear activations — in PyTorch from a Tandem checkpoint (Keras HDF5 layout, read with
h5py), trains it for --steps steps on the exact batches Tandem wrote (raw little-endian float32
files), and writes what it ends with:

  <out>/manifest.json   {"losses": [per-step mean loss, before each update], "tensors": [...]}
  <out>/<layer>.<weight>.bin   float32, C order, in Keras layout (Dense kernel (in, out), Conv2D
                               kernel (kh, kw, in, out)); layouts are converted here, never in Tandem

Activations are kept in Keras' channels-last layout between layers (a Conv2D or pooling layer
permutes to PyTorch's NCHW and back), so Flatten sees the same element order as in Keras.

All arithmetic is float32 on one CPU thread. Exit code 3 means torch/h5py/numpy are missing.

Optimizer: NOT torch.optim.Adam. torch's Adam computes
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)     (eps added to sqrt(v_hat))
while Keras (and Tandem, core/src/optim/optimizers.cpp) compute
    alpha = lr * sqrt(1 - b2^t) / (1 - b1^t);  p -= alpha * m / (sqrt(v) + eps)  (eps_hat).
Multiplying through by sqrt(1 - b2^t), torch's rule is Keras's with eps replaced by
eps * sqrt(1 - b2^t) (0.03 * eps at t = 1, 0.14 * eps at t = 20). That is not negligible against a
1e-4 bar: for a weight whose gradient is of the order of eps (1e-7; 0.7% of the first layer's
gradients at step 1 are below 1e-6, from border pixels) the step changes by a good fraction of lr,
and Adam amplifies such differences. Measured on the oracle's 20 steps: torch.optim.Adam(eps=1e-7)
ends 0.18 (max|diff|/max|w|, first kernel) to 0.24 (dense_1 bias) away from the Keras rule, while
Tandem matches the Keras rule to ~1e-6. So the Keras rule is written out below (KerasAdam) in a
few lines of torch, with Tandem's operation order and float32 constants; `--optimizer torch` runs
torch.optim.Adam instead, only to measure that difference by hand.
"""

import argparse
import json
import math
import os
import sys

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:  # the C++ test turns this into a failure with this message
    print(f"keras_sequential_torch.py: cannot import {e.name} with {sys.executable}: {e}. "
          "Install Debian's python3-torch and python3-h5py (scripts/setup does).", file=sys.stderr)
    sys.exit(3)


def attr_str(value):
    return value.decode("ascii") if isinstance(value, bytes) else str(value)


def read_layers(path):
    """[(class, name, config, {weight: array})] in model order, from a Tandem/Keras checkpoint."""
    with h5py.File(path, "r") as f:
        config = json.loads(attr_str(f.attrs["model_config"]))
        weights = f["model_weights"]
        layers = []
        for layer in config["config"]["layers"]:
            cls, cfg = layer["class_name"], layer["config"]
            if cls == "InputLayer":
                continue
            name = cfg["name"]
            arrays = {}
            if name in weights and name in weights[name]:
                for key, ds in weights[name][name].items():
                    arrays[key.split(":")[0]] = np.asarray(ds, dtype=np.float32)
            layers.append((cls, name, cfg, arrays))
        return layers


def pair(v):
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


class KerasSequential(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.steps = []          # (kind, module or None, extra)
        self.weighted = []       # (name, module, kind) for the weights written back
        self.mods = torch.nn.ModuleList()
        for cls, name, cfg, w in layers:
            act = cfg.get("activation", "linear") or "linear"
            if act not in ("relu", "linear"):
                raise SystemExit(f"keras_sequential_torch.py: unsupported activation {act}")
            if cls == "Dense":
                k, b = w["kernel"], w["bias"]
                lin = torch.nn.Linear(k.shape[0], k.shape[1], dtype=torch.float32)
                with torch.no_grad():
                    lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(k.T)))  # (out, in)
                    lin.bias.copy_(torch.from_numpy(b))
                self.mods.append(lin)
                self.steps.append(("dense", lin, act))
                self.weighted.append((name, lin, "dense"))
            elif cls == "Conv2D":
                k, b = w["kernel"], w["bias"]  # (kh, kw, in, out)
                if cfg.get("padding", "valid") != "valid" or pair(cfg.get("strides", 1)) != (1, 1):
                    raise SystemExit("keras_sequential_torch.py: only valid, stride-1 Conv2D")
                conv = torch.nn.Conv2d(k.shape[2], k.shape[3], k.shape[:2],
                                       dilation=pair(cfg.get("dilation_rate", 1)),
                                       dtype=torch.float32)
                with torch.no_grad():
                    conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(k.transpose(3, 2, 0, 1))))
                    conv.bias.copy_(torch.from_numpy(b))
                self.mods.append(conv)
                self.steps.append(("conv", conv, act))
                self.weighted.append((name, conv, "conv"))
            elif cls == "MaxPooling2D":
                size = pair(cfg.get("pool_size", 2))
                strides = pair(cfg.get("strides") or size)
                if cfg.get("padding", "valid") != "valid":
                    raise SystemExit("keras_sequential_torch.py: only valid MaxPooling2D")
                self.steps.append(("maxpool", None, (size, strides)))
            elif cls == "Reshape":
                self.steps.append(("reshape", None, tuple(cfg["target_shape"])))
            elif cls == "Flatten":
                self.steps.append(("flatten", None, None))
            else:
                raise SystemExit(f"keras_sequential_torch.py: unsupported layer {cls} '{name}'")

    def forward(self, x):
        h = x
        for kind, mod, extra in self.steps:
            if kind == "reshape":
                h = h.reshape((h.shape[0],) + extra)
            elif kind == "flatten":
                h = h.reshape(h.shape[0], -1)  # channels-last order, as Keras and Tandem
            elif kind == "dense":
                h = mod(h)
                if extra == "relu":
                    h = torch.relu(h)
            elif kind == "conv":
                h = mod(h.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
                if extra == "relu":
                    h = torch.relu(h)
            elif kind == "maxpool":
                size, strides = extra
                h = torch.nn.functional.max_pool2d(h.permute(0, 3, 1, 2), size, strides)
                h = h.permute(0, 2, 3, 1)
        return h

    def parameters_in_order(self):
        out = []
        for _, mod, _ in self.weighted:
            out += [mod.weight, mod.bias]
        return out

    def keras_weights(self):
        """[(name/weight, array in Keras layout)]"""
        out = []
        for name, mod, kind in self.weighted:
            w = mod.weight.detach().numpy()
            kernel = w.T if kind == "dense" else w.transpose(2, 3, 1, 0)
            out.append((f"{name}/kernel", kernel))
            out.append((f"{name}/bias", mod.bias.detach().numpy()))
        return out


class KerasAdam:
    """Keras 3 / Tandem Adam in float32 (see the module docstring)."""

    def __init__(self, params, lr, beta_1, beta_2, epsilon):
        self.params = list(params)
        self.lr, self.beta_1, self.beta_2 = lr, beta_1, beta_2
        f32 = np.float32
        # Tandem: b1 = float(beta_1); (1.0f - b1) evaluated in float32. Same for b2 and eps.
        self.one_minus_b1 = float(f32(1) - f32(beta_1))
        self.one_minus_b2 = float(f32(1) - f32(beta_2))
        self.eps = float(f32(epsilon))
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        t = float(self.t)
        # alpha in double, then rounded to float32, as Tandem does.
        alpha = float(np.float32(self.lr * math.sqrt(1.0 - self.beta_2 ** t) /
                                 (1.0 - self.beta_1 ** t)))
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.add_((g - m) * self.one_minus_b1)
            v.add_((g * g - v) * self.one_minus_b2)
            p.sub_((m * alpha) / (v.sqrt() + self.eps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True, help="Tandem checkpoint with the initial weights")
    ap.add_argument("--x", required=True, help="float32 inputs, steps*batch samples in order")
    ap.add_argument("--y", required=True, help="float32 class indices, one per sample")
    ap.add_argument("--sample-shape", required=True, help="e.g. 28,28")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--epsilon", type=float, default=1e-7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--optimizer", choices=["keras", "torch", "sgd"], default="keras",
                    help="keras: Keras/Tandem Adam; torch: torch.optim.Adam; sgd: plain SGD")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)

    sample_shape = [int(s) for s in args.sample_shape.split(",")]
    n = args.steps * args.batch
    x = np.fromfile(args.x, dtype="<f4")
    y = np.fromfile(args.y, dtype="<f4")
    if x.size != n * math.prod(sample_shape) or y.size != n:
        raise SystemExit(f"keras_sequential_torch.py: expected {n} samples, got x of {x.size} floats "
                         f"and y of {y.size}")
    x = torch.from_numpy(x.reshape([n] + sample_shape))
    labels = torch.from_numpy(y.astype(np.int64))
    if not torch.equal(labels.to(torch.float32), torch.from_numpy(y)):
        raise SystemExit("keras_sequential_torch.py: labels are not whole numbers")

    model = KerasSequential(read_layers(args.init))
    model.train()
    params = model.parameters_in_order()
    if args.optimizer == "keras":
        opt = KerasAdam(params, args.lr, args.beta1, args.beta2, args.epsilon)
    elif args.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=args.lr)  # w -= lr g, as Keras and Tandem
    else:
        opt = torch.optim.Adam(params, lr=args.lr, betas=(args.beta1, args.beta2),
                               eps=args.epsilon)

    losses = []
    for step in range(args.steps):
        xb = x[step * args.batch:(step + 1) * args.batch]
        yb = labels[step * args.batch:(step + 1) * args.batch]
        for p in params:
            p.grad = None
        logits = model(xb)
        loss = torch.nn.functional.cross_entropy(logits, yb, reduction="mean")
        loss.backward()
        losses.append(float(loss.item()))
        opt.step()

    os.makedirs(args.out, exist_ok=True)
    tensors = []
    for full_name, value in model.keras_weights():
        value = np.ascontiguousarray(value, dtype="<f4")
        file = full_name.replace("/", ".") + ".bin"
        value.tofile(os.path.join(args.out, file))
        tensors.append({"name": full_name, "file": file, "shape": list(value.shape)})
    manifest = {"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                "losses": losses, "tensors": tensors}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"torch {torch.__version__}: {args.steps} steps, first loss {losses[0]:.6f}, "
          f"last loss {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
