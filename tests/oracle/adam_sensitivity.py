#!/usr/bin/python3
"""How much does Adam on a workload amplify rounding-sized gradient noise? PyTorch against itself.

Trains the model of an oracle scratch folder (init.h5, x.f32, y.f32 as the oracle test writes
them; the folder is kept when the test fails) twice with the Keras Adam rule: once as is, once
with noise of 1e-7 x max|g| added to every gradient (the size of a float32 summation-order
difference). Prints max|a-b|/max|a| per tensor after 20 steps. For fashion-cnn it prints up to
2.7e-3 (dense/bias) and 1.8e-4 (conv2d_1/kernel): a 1e-4 bar cannot separate two correct
implementations there, which is why the CNN oracle uses SGD (tests/oracle/README.md).

    /usr/bin/python3 tests/oracle/adam_sensitivity.py build/test-scratch/<workload>-adam-oracle-*
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keras_sequential_torch as K  # noqa: E402


def run(folder, noise, steps=20, batch=128):
    x = np.fromfile(os.path.join(folder, "x.f32"), dtype="<f4").reshape(-1, 28, 28)
    y = np.fromfile(os.path.join(folder, "y.f32"), dtype="<f4").astype(np.int64)
    model = K.KerasSequential(K.read_layers(os.path.join(folder, "init.h5")))
    params = model.parameters_in_order()
    opt = K.KerasAdam(params, 1e-3, 0.9, 0.999, 1e-7)
    gen = torch.Generator().manual_seed(0)
    for step in range(steps):
        xb = torch.from_numpy(x[step * batch:(step + 1) * batch])
        yb = torch.from_numpy(y[step * batch:(step + 1) * batch])
        for p in params:
            p.grad = None
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        for p in params:
            p.grad.add_(noise * p.grad.abs().max() * torch.randn(p.grad.shape, generator=gen))
        opt.step()
    return dict(model.keras_weights())


def main():
    torch.set_num_threads(1)
    folder = sys.argv[1]
    a, b = run(folder, 0.0), run(folder, 1e-7)
    for name in a:
        print(f"{name:18s} {np.abs(a[name] - b[name]).max() / np.abs(a[name]).max():.3g}")


if __name__ == "__main__":
    main()
