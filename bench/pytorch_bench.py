#!/usr/bin/python3
"""PyTorch side of bench/run: the fashion-mlp, seed-mlp and fashion-cnn training steps, timed like
tandem_bench.

Run with Debian's /usr/bin/python3 (python3-torch, CPU). Same models (layer sizes, activations,
Keras-like initialisation does not matter for speed), same losses, torch.optim.Adam with the same
learning rates, same batch sizes, random in-memory batches, no data loading: a step is
zero_grad + forward + loss + backward + optimizer.step(). Warm-up steps first, then timed runs;
the median is reported. Prints one JSON object on stdout (progress on stderr).

The image models (fashion-cnn, fashion-resnet) are timed in both of PyTorch's layouts, NCHW and
channels_last (Tandem's configs are channels-last), and the faster one is the anchor: on the
Intel Xeon VM of 2026-11-28 channels_last was 20-35% faster for both.

  /usr/bin/python3 bench/pytorch_bench.py [--threads 2] [--only fashion-mlp,seed-mlp,fashion-cnn]
                                          [--seed-steps 10] [--seed-batch 256] [--quick]
                                          [--autocast bf16]

torch's fp32 GEMMs run on OpenBLAS (Debian's torch uses libblas.so.3): the script exits when
libblas.so.3 is the reference BLAS, and when OpenBLAS took an AVX2/AVX-512 CPU for an older one
(0.3.21 calls an Emerald Rapids Xeon "Prescott") and OPENBLAS_CORETYPE is unset, it reruns itself
with the kernels the CPU's flags deserve; the JSON's "openblas_detected_core" then says what
OpenBLAS had picked.

--autocast bf16 runs each forward under torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's
mixed precision: bf16 matrix products and convolutions, float32 weights and optimizer), the loss
on the output in float32; the backward follows the forward's types.
"""
import contextlib
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
from torch import nn

from torch_blas import (ALLOCATOR_SETTINGS, keep_freed_memory, openblas_info,
                        require_openblas_with_the_cpus_kernels)

def progress(msg):
    print(f"[pytorch_bench] {msg}", file=sys.stderr, flush=True)


def fashion_mlp():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)
    )


def seed_mlp():
    return nn.Sequential(
        nn.Linear(8000, 4000), nn.Tanh(),
        nn.Linear(4000, 2000), nn.ReLU(),
        nn.Linear(2000, 500), nn.ReLU(),
        nn.Linear(500, 300), nn.ReLU(),
        nn.Linear(300, 1), nn.Sigmoid(),
    )


def fashion_cnn():
    """resources/configs/fashion-cnn.json in NCHW: 1x28x28 -> conv 32 -> pool -> conv 64 -> pool -> 1600."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10),
    )


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with batch norm, added to the (projected) input, then relu."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.project = None
        if stride != 1 or cin != cout:
            self.project = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                         nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1))

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return torch.relu(h + (x if self.project is None else self.project(x)))


def fashion_resnet():
    """resources/configs/fashion-resnet.json (resources/configs/fashion-resnet.py) in NCHW."""
    layers = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for filters, first_stride in ((16, 1), (32, 2), (64, 2)):
        for block in range(3):
            layers.append(ResidualBlock(cin, filters, first_stride if block == 0 else 1))
            cin = filters
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


class EncoderBlock(nn.Module):
    """One encoder block of tiny-transformer: self-attention and a feed-forward network, each
    added back and layer-normalised (post-norm, as the Keras model)."""

    def __init__(self, width, heads, hidden):
        super().__init__()
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(width, eps=1e-6)
        self.ff = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width))
        self.norm2 = nn.LayerNorm(width, eps=1e-6)

    def forward(self, h):
        a, _ = self.attention(h, h, h, need_weights=False)
        h = self.norm1(h + a)
        return self.norm2(h + self.ff(h))


class TinyTransformer(nn.Module):
    """resources/configs/tiny-transformer.json (resources/configs/tiny-transformer.py): 16
    tokens of a 32-word vocabulary, width 32, 4 heads of 8, 2 blocks, a sigmoid output."""

    def __init__(self, sequence=16, vocabulary=32, width=32, heads=4, hidden=64, blocks=2):
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Parameter(torch.randn(sequence, width) * 0.1)
        self.blocks = nn.Sequential(*[EncoderBlock(width, heads, hidden) for _ in range(blocks)])
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        h = self.blocks(self.tokens(x) + self.positions)
        return torch.sigmoid(self.out(h.mean(dim=1)))


AUTOCAST = None  # torch.bfloat16 with --autocast bf16


def forward(model, x):
    """model(x), under bf16 autocast when asked, as float32."""
    context = (torch.autocast("cpu", dtype=AUTOCAST) if AUTOCAST is not None
               else contextlib.nullcontext())
    with context:
        out = model(x)
    return out.float()


def bench_steps(model, loss_fn, opt, batches, warmup, runs, per_run, batch):
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(forward(model, x), y)
        loss.backward()
        opt.step()

    k = 0
    for _ in range(warmup):
        x, y = batches[k % len(batches)]
        step(x, y)
        k += 1
    sps = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(per_run):
            x, y = batches[k % len(batches)]
            step(x, y)
            k += 1
        sps.append(batch * per_run / (time.perf_counter() - t0))
    return {
        "samples_per_s": statistics.median(sps),
        "samples_per_s_runs": sps,
        "steps_per_run": per_run,
        "warmup_steps": warmup,
        "step_ms": 1e3 * batch / statistics.median(sps),
    }


def run_fashion(args):
    torch.manual_seed(0)
    batch = 128
    model = fashion_mlp()
    loss_fn = nn.CrossEntropyLoss()  # sparse CE from logits, batch mean
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [(torch.rand(batch, 28, 28), torch.randint(0, 10, (batch,))) for _ in range(16)]
    r = {"parameters": sum(p.numel() for p in model.parameters()), "batch": batch,
         "loss": "CrossEntropyLoss (logits)", "optimizer": "Adam(lr=1e-3)"}
    r["step"] = bench_steps(model, loss_fn, opt, batches, 40, 5 if args.quick else 15, 40, batch)
    return r


def run_seed(args):
    torch.manual_seed(0)
    batch = args.seed_batch
    model = seed_mlp()
    loss_fn = nn.BCELoss()  # binary cross-entropy on the sigmoid's probabilities, batch mean
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = [(torch.rand(batch, 8000), torch.randint(0, 2, (batch, 1)).float()) for _ in range(4)]
    r = {"parameters": sum(p.numel() for p in model.parameters()), "batch": batch,
         "loss": "BCELoss (after Sigmoid)", "optimizer": "Adam(lr=1e-4)"}
    r["step"] = bench_steps(model, loss_fn, opt, batches, 3, 3 if args.quick else args.seed_steps, 1, batch)
    return r


def run_fashion_images(make_model, args, batches, warmup, runs, per_run, adamw_decay=0.0):
    """A Fashion-MNIST image model, batch 128, on `batches` random batches: Adam 1e-3, or with
    `adamw_decay` AdamW 2e-3 with that weight decay (the resource config's optimizer). Timed in
    both of PyTorch's layouts, NCHW and channels_last (NHWC, Tandem's own: oneDNN convolutions
    without activation reorders); "step" is the faster one's, the anchor, and "layouts" has both."""
    batch = 128
    loss_fn = nn.CrossEntropyLoss()  # sparse CE from logits, batch mean
    if adamw_decay:
        name = f"AdamW(lr=2e-3, weight_decay={adamw_decay})"
        make_optimizer = lambda p: torch.optim.AdamW(p, lr=2e-3, weight_decay=adamw_decay)
    else:
        name = "Adam(lr=1e-3)"
        make_optimizer = lambda p: torch.optim.Adam(p, lr=1e-3)
    steps = {}
    for layout, memory_format in (("NCHW", torch.contiguous_format),
                                  ("NHWC", torch.channels_last)):
        torch.manual_seed(0)
        model = make_model().to(memory_format=memory_format)
        data = [(torch.rand(batch, 1, 28, 28).contiguous(memory_format=memory_format),
                 torch.randint(0, 10, (batch,))) for _ in range(batches)]
        steps[layout] = bench_steps(model, loss_fn, make_optimizer(model.parameters()), data, warmup,
                                    3 if args.quick else runs, per_run, batch)
    fastest = max(steps, key=lambda layout: steps[layout]["samples_per_s"])
    return {"parameters": sum(p.numel() for p in model.parameters()), "batch": batch,
            "layout": fastest, "mkldnn_enabled": torch.backends.mkldnn.enabled,
            "loss": "CrossEntropyLoss (logits)", "optimizer": name, "step": steps[fastest],
            "layouts": {layout: step["samples_per_s"] for layout, step in steps.items()}}


def run_cnn(args):
    return run_fashion_images(fashion_cnn, args, batches=8, warmup=10, runs=20, per_run=8)


def run_resnet(args):
    return run_fashion_images(fashion_resnet, args, batches=4, warmup=3, runs=8, per_run=4,
                              adamw_decay=0.05)


def run_transformer(args):
    torch.manual_seed(0)
    batch = 64
    model = TinyTransformer()
    loss_fn = nn.BCELoss()  # binary cross-entropy on the sigmoid's probabilities, batch mean
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = [(torch.randint(1, 32, (batch, 16)), torch.randint(0, 2, (batch, 1)).float())
            for _ in range(4)]
    r = {"parameters": sum(p.numel() for p in model.parameters()), "batch": batch,
         "loss": "BCELoss (after Sigmoid)", "optimizer": "Adam(lr=1e-3)"}
    r["step"] = bench_steps(model, loss_fn, opt, data, 5, 3 if args.quick else 8, 8, batch)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (0: leave torch's default)")
    ap.add_argument("--only", default="fashion-mlp,seed-mlp,fashion-cnn")
    ap.add_argument("--seed-steps", type=int, default=10)
    ap.add_argument("--seed-batch", type=int, default=256)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--autocast", choices=["bf16"], default=None,
                    help="run forwards under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    args = ap.parse_args()
    global AUTOCAST
    if args.autocast == "bf16":
        AUTOCAST = torch.bfloat16

    keep_freed_memory("pytorch_bench")
    require_openblas_with_the_cpus_kernels("pytorch_bench")
    default_threads = torch.get_num_threads()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    out = {
        "tool": "pytorch_bench",
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "torch_default_threads": default_threads,
        "threads": torch.get_num_threads(),
        "threads_note": ("torch.set_num_threads(%d)" % args.threads) if args.threads > 0
                        else "torch's default",
        "openblas": openblas_info(),
        "openblas_detected_core": os.environ.get("TORCH_BLAS_DETECTED_CORE"),
        "malloc_env": {k: os.environ.get(k) for k in ALLOCATOR_SETTINGS},
        "autocast": args.autocast,
        "env": {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE",
                                            "OPENBLAS_NUM_THREADS", "MALLOC_MMAP_THRESHOLD_",
                                            "MALLOC_TRIM_THRESHOLD_") if k in os.environ},
        "workloads": {},
    }
    only = set(args.only.split(","))
    progress(f"torch {torch.__version__}, {out['threads']} thread(s), OpenBLAS {out['openblas'].get('corename')}")
    if "fashion-mlp" in only:
        progress("fashion-mlp")
        out["workloads"]["fashion-mlp"] = run_fashion(args)
    if "seed-mlp" in only:
        progress("seed-mlp")
        out["workloads"]["seed-mlp"] = run_seed(args)
    if "fashion-cnn" in only:
        progress("fashion-cnn")
        out["workloads"]["fashion-cnn"] = run_cnn(args)
    if "fashion-resnet" in only:  # not in the default set: bench/workload_compare runs it
        progress("fashion-resnet")
        out["workloads"]["fashion-resnet"] = run_resnet(args)
    if "tiny-transformer" in only:  # not in the default set: bench/transformer_compare runs it
        progress("tiny-transformer")
        out["workloads"]["tiny-transformer"] = run_transformer(args)
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
