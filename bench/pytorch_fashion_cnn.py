#!/usr/bin/python3
"""PyTorch side of bench/time_to_accuracy: trains the fashion-cnn on the real Fashion-MNIST.

The model, optimizer and batch size of resources/configs/fashion-cnn.json, in PyTorch's native
NCHW layout: Conv2d(1, 32, 3) + ReLU, MaxPool2d(2), Conv2d(32, 64, 3) + ReLU, MaxPool2d(2),
Flatten, Linear(1600, 128) + ReLU, Linear(128, 10); cross_entropy on the logits; Adam(lr=1e-3);
batch 128 (the last, partial batch of an epoch included, as Tandem's DataLoader does). PyTorch's
default initialisation (Tandem uses Keras' glorot_uniform and zero biases).

Data: the gz IDX files are read with numpy and scaled by 1/255, all in memory before the clock
starts; the 60k training images are shuffled every epoch; after each epoch the model is evaluated
on the 10k test images (the config's validation set). The seconds of an epoch cover training and
validation, as the "seconds" of Tandem's epoch_ended event do.

Prints one JSON line per epoch on stdout: epoch, seconds (this epoch), cumulative_seconds, loss,
accuracy, val_loss, val_accuracy. Threads: --threads N calls torch.set_num_threads(N) (0: torch's
default); set OMP_WAIT_POLICY / OPENBLAS_CORETYPE in the environment (see bench/time_to_accuracy;
without OPENBLAS_CORETYPE, bench/torch_blas.py picks the CPU's kernels where OpenBLAS does not).

  /usr/bin/python3 bench/pytorch_fashion_cnn.py [--epochs 10] [--threads 2] [--seed 0]
                                                [--data /usr/share/datasets/fashion-mnist]
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

from torch_blas import keep_freed_memory, require_openblas_with_the_cpus_kernels


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, prefix):
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1).contiguous(), torch.from_numpy(y)


def fashion_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    keep_freed_memory("pytorch_fashion_cnn")
    require_openblas_with_the_cpus_kernels("pytorch_fashion_cnn")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    x_train, y_train = load(args.data, "train")
    x_val, y_val = load(args.data, "t10k")
    print(f"[pytorch_fashion_cnn] torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"train {tuple(x_train.shape)}, validation {tuple(x_val.shape)}", file=sys.stderr, flush=True)
    model = fashion_cnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n, b = x_train.shape[0], args.batch
    total = 0.0
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        perm = torch.randperm(n)
        loss_sum, correct = 0.0, 0
        for i in range(0, n, b):
            idx = perm[i:i + b]
            x, y = x_train[idx], y_train[idx]
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            correct += (out.argmax(1) == y).sum().item()
        model.eval()
        val_loss, val_correct = 0.0, 0
        with torch.no_grad():
            for i in range(0, x_val.shape[0], b):
                x, y = x_val[i:i + b], y_val[i:i + b]
                out = model(x)
                val_loss += F.cross_entropy(out, y, reduction="sum").item()
                val_correct += (out.argmax(1) == y).sum().item()
        secs = time.perf_counter() - t0
        total += secs
        print(json.dumps({"epoch": epoch, "seconds": secs, "cumulative_seconds": total,
                          "loss": loss_sum / n, "accuracy": correct / n,
                          "val_loss": val_loss / x_val.shape[0],
                          "val_accuracy": val_correct / x_val.shape[0]}), flush=True)


if __name__ == "__main__":
    main()
