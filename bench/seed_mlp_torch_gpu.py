"""PyTorch's side of bench/gpu_mlp_steps and bench/gpu_train_steps: full training steps (forward,
loss, backward, Adam) of seed-mlp (batch 8192, binary cross-entropy), fashion-mlp and fashion-cnn
(batch 128, sparse categorical cross-entropy from logits) with the data already on the GPU, in fp32,
tf32 (allow_tf32), bf16 (autocast) and fp16 (autocast with a GradScaler).
Prints one JSON line per measurement: the median of 30 timed steps after 10 warm-up steps,
timed with CUDA events."""
import json
import statistics

import torch


def model(widths, hidden):
    """Linear layers of the given widths, hidden[i] after layer i (none after the last)."""
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(hidden[i]())
    return torch.nn.Sequential(*layers)


def fashion_cnn():
    """resources/configs/fashion-cnn.json in PyTorch (NCHW, cuDNN)."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 5 * 5, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))


def bench(name, widths, batch, hidden, loss_fn, targets, precision, net=None, x_shape=None):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.manual_seed(0)
    net = (net or model(widths, hidden)).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-4, eps=1e-7)
    x = torch.randn(batch, *(x_shape or [widths[0]]), device="cuda")
    y = targets(batch)

    # Mixed precision as PyTorch's AMP recipe has it: autocast for the forward and the loss, and
    # for float16 a GradScaler (dynamic loss scaling, as Tandem's LossScaleOptimizer).
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.cuda.amp.GradScaler() if precision == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=low, enabled=low is not None):
            loss = loss_fn(net(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    for _ in range(10):
        step()
    times = []
    for _ in range(30):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    print(json.dumps({"bench": "torch_step", "workload": name, "precision": precision,
                      "step_ms": round(statistics.median(times), 4), "batch": batch,
                      "torch": torch.__version__}), flush=True)


def main():
    if not torch.cuda.is_available():
        print("seed_mlp_torch_gpu: no CUDA device for PyTorch")
        return
    for precision in ("fp32", "tf32", "bf16", "fp16"):
        bench("seed-mlp", [8000, 4000, 2000, 500, 300, 1], 8192,
              [torch.nn.Tanh, torch.nn.ReLU, torch.nn.ReLU, torch.nn.ReLU],
              lambda out, y: torch.nn.functional.binary_cross_entropy_with_logits(out, y),
              lambda b: torch.randint(0, 2, (b, 1), device="cuda").float(), precision)
        bench("fashion-mlp", [784, 256, 128, 10], 128, [torch.nn.ReLU, torch.nn.ReLU],
              torch.nn.functional.cross_entropy,
              lambda b: torch.randint(0, 10, (b,), device="cuda"), precision)
        bench("fashion-cnn", None, 128, None, torch.nn.functional.cross_entropy,
              lambda b: torch.randint(0, 10, (b,), device="cuda"), precision, net=fashion_cnn(),
              x_shape=[1, 28, 28])


if __name__ == "__main__":
    main()
