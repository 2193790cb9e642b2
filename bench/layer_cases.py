#!/usr/bin/python3
"""Single-layer training steps, Tandem's run config and PyTorch's twin of each (bench/layer_compare).

Each case is a small model around the layer being timed, written once as Keras layer configs
(for `tandem_bench --config`) and once as a torch.nn module with the same shapes, initial weights
aside: a step is zero_grad + forward + loss + backward + Adam, on random inputs in [0, 1) and
random class labels, as bench/pytorch_bench.py times the reference workloads. A `*_base` case is
its case without the layer, to tell the layer's own time from the model's around it.

  /usr/bin/python3 bench/layer_cases.py --list
  /usr/bin/python3 bench/layer_cases.py --config CASE > run.json   # Tandem's run config
  /usr/bin/python3 bench/layer_cases.py --torch CASE [--threads 2]  # PyTorch: one JSON line

Image cases are channels-last in Tandem; PyTorch runs them in both of its layouts and reports the
faster (as pytorch_bench.py does).
"""
import argparse
import json
import os
import statistics
import sys
import time

CASES = {}


def case(name, batch, input_shape, layers, torch_layers, image=False):
    CASES[name] = dict(batch=batch, input_shape=input_shape, layers=layers,
                       torch_layers=torch_layers, image=image)


def keras(class_name, **config):
    return {"class_name": class_name, "config": config}


# A sequence of 64 steps of 128 features through two Dense layers, each followed by a
# LayerNormalization over the features (Keras' epsilon 1e-3), then pooled to 10 logits.
def _sequence_layers(norm):
    layers = [keras("Dense", units=128, activation="relu")]
    if norm:
        layers.append(keras("LayerNormalization", epsilon=1e-3))
    layers.append(keras("Dense", units=128, activation="relu"))
    if norm:
        layers.append(keras("LayerNormalization", epsilon=1e-3))
    return layers + [keras("GlobalAveragePooling1D"), keras("Dense", units=10)]


def _sequence_torch(norm):
    def build(nn):
        class Pool(nn.Module):
            def forward(self, x):
                return x.mean(dim=1)
        layers = [nn.Linear(128, 128), nn.ReLU()]
        if norm:
            layers.append(nn.LayerNorm(128, eps=1e-3))
        layers += [nn.Linear(128, 128), nn.ReLU()]
        if norm:
            layers.append(nn.LayerNorm(128, eps=1e-3))
        return layers + [Pool(), nn.Linear(128, 10)]
    return build


case("layernorm", 64, [64, 128], _sequence_layers(True), _sequence_torch(True))
case("layernorm_base", 64, [64, 128], _sequence_layers(False), _sequence_torch(False))


# Two 3x3 convolutions of 32 channels on a 32x32x16 image, each followed by a
# LayerNormalization over the channels (ConvNeXt's use: many short rows), then pooled.
def _image_norm_layers(norm):
    layers = []
    for _ in range(2):
        layers.append(keras("Conv2D", filters=32, kernel_size=[3, 3], padding="same",
                            activation="relu"))
        if norm:
            layers.append(keras("LayerNormalization", epsilon=1e-3))
    return layers + [keras("GlobalAveragePooling2D"), keras("Dense", units=10)]


def _image_norm_torch(norm):
    def build(nn):
        class ChannelNorm(nn.Module):  # LayerNorm over the channels of an NCHW tensor
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(32, eps=1e-3)

            def forward(self, x):
                return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

        class Pool(nn.Module):
            def forward(self, x):
                return x.mean(dim=(2, 3))
        layers = []
        for c in (16, 32):
            layers += [nn.Conv2d(c, 32, 3, padding=1), nn.ReLU()]
            if norm:
                layers.append(ChannelNorm())
        return layers + [Pool(), nn.Linear(32, 10)]
    return build


case("layernorm_image", 64, [32, 32, 16], _image_norm_layers(True), _image_norm_torch(True),
     image=True)
case("layernorm_image_base", 64, [32, 32, 16], _image_norm_layers(False),
     _image_norm_torch(False), image=True)


# MultiHeadAttention's projections alone: 64 steps of 128 features into 8 heads of 16 and back
# by EinsumDense (Keras' equations; the bias per head and unit, then per feature), pooled to 10
# logits, against torch.einsum of the same equations with the same parameters.
def _einsum_layers():
    return [keras("EinsumDense", equation="abc,cde->abde", output_shape=[None, 8, 16],
                  bias_axes="de", activation="relu"),
            keras("EinsumDense", equation="abcd,cde->abe", output_shape=[None, 128],
                  bias_axes="e"),
            keras("GlobalAveragePooling1D"), keras("Dense", units=10)]


def _einsum_torch(nn):
    import torch

    class Einsum(nn.Module):
        def __init__(self, equation, kernel, bias):
            super().__init__()
            self.equation = equation
            self.kernel = nn.Parameter(torch.randn(*kernel) * 0.05)
            self.bias = nn.Parameter(torch.zeros(*bias))

        def forward(self, x):
            return torch.einsum(self.equation, x, self.kernel) + self.bias

    class Pool(nn.Module):
        def forward(self, x):
            return x.mean(dim=1)
    return [Einsum("abc,cde->abde", (128, 8, 16), (8, 16)), nn.ReLU(),
            Einsum("abcd,cde->abe", (8, 16, 128), (128,)), Pool(), nn.Linear(128, 10)]


case("einsum_dense", 64, [64, 128], _einsum_layers(), _einsum_torch)


# A recurrent layer of 128 units over 50 steps of 32 features, its last step's output into 10
# logits (Keras' LSTM/GRU against torch.nn.LSTM/GRU, batch_first; a text classifier's shape).
def _recurrent_layers(cls):
    return [keras(cls, units=128), keras("Dense", units=10)]


def _recurrent_torch(cls):
    def build(nn):
        class Last(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = getattr(nn, cls)(32, 128, batch_first=True)

            def forward(self, x):
                return self.rnn(x)[0][:, -1]
        return [Last(), nn.Linear(128, 10)]
    return build


case("lstm", 64, [50, 32], _recurrent_layers("LSTM"), _recurrent_torch("LSTM"))
case("gru", 64, [50, 32], _recurrent_layers("GRU"), _recurrent_torch("GRU"))


# 1x1 convolutions on a 32x32x64 image, stride 2 or 1, then pooled to 10 logits.
def _pointwise_layers(strides):
    return [keras("Conv2D", filters=128, kernel_size=[1, 1], strides=[strides, strides],
                  activation="relu"),
            keras("GlobalAveragePooling2D"), keras("Dense", units=10)]


def _pointwise_torch(strides):
    def build(nn):
        class Pool(nn.Module):
            def forward(self, x):
                return x.mean(dim=(2, 3))
        return [nn.Conv2d(64, 128, 1, stride=strides), nn.ReLU(), Pool(), nn.Linear(128, 10)]
    return build


case("conv1x1_s2", 64, [32, 32, 64], _pointwise_layers(2), _pointwise_torch(2), image=True)
case("conv1x1", 64, [32, 32, 64], _pointwise_layers(1), _pointwise_torch(1), image=True)


# A 3x3 convolution of 32 channels on a 32x32x3 image, flattened straight into 10 logits (a
# 32,768 x 10 Dense: skinny products), or max-pooled 2x2 first.
def _flatten_layers(pool):
    layers = [keras("Conv2D", filters=32, kernel_size=[3, 3], padding="same", activation="relu")]
    if pool:
        layers.append(keras("MaxPooling2D", pool_size=[2, 2]))
    return layers + [keras("Flatten"), keras("Dense", units=10)]


def _flatten_torch(pool):
    def build(nn):
        class ChannelsLastFlatten(nn.Module):  # Keras flattens (h, w, c)
            def forward(self, x):
                return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        layers = [nn.Conv2d(3, 32, 3, padding=1), nn.ReLU()]
        if pool:
            layers.append(nn.MaxPool2d(2))
        side = 16 if pool else 32
        return layers + [ChannelsLastFlatten(), nn.Linear(side * side * 32, 10)]
    return build


case("flatten_dense", 64, [32, 32, 3], _flatten_layers(False), _flatten_torch(False), image=True)
case("maxpool_flatten_dense", 64, [32, 32, 3], _flatten_layers(True), _flatten_torch(True),
     image=True)


# A 3-D CNN block as keras.io's CT-scan classifier stacks them: a 3x3x3 convolution of 16
# channels on a 16x32x32x8 volume, 2x2x2 max pooling, a 3x3x3 convolution of 32, pooled to 10
# logits.
def _volume_layers():
    return [keras("Conv3D", filters=16, kernel_size=[3, 3, 3], padding="same", activation="relu"),
            keras("MaxPooling3D", pool_size=[2, 2, 2]),
            keras("Conv3D", filters=32, kernel_size=[3, 3, 3], padding="same", activation="relu"),
            keras("GlobalAveragePooling3D"), keras("Dense", units=10)]


def _volume_torch(nn):
    class Pool(nn.Module):
        def forward(self, x):
            return x.mean(dim=(2, 3, 4))
    return [nn.Conv3d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2),
            nn.Conv3d(16, 32, 3, padding=1), nn.ReLU(), Pool(), nn.Linear(32, 10)]


case("conv3d", 16, [16, 32, 32, 8], _volume_layers(), _volume_torch, image=True)


# A ConvLSTM2D of 16 filters (3x3, same) over 8 frames of 16x16x8, its last h pooled to 10
# logits. The PyTorch twin is the ConvLSTM its users write (torch has none): per step one Conv2d
# over the input and h concatenated, the gates split, the cell's products.
def _conv_lstm_layers():
    return [keras("ConvLSTM2D", filters=16, kernel_size=[3, 3], padding="same"),
            keras("GlobalAveragePooling2D"), keras("Dense", units=10)]


def _conv_lstm_torch(nn):
    import torch

    class ConvLstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8 + 16, 4 * 16, 3, padding=1)

        def forward(self, x):  # (N, T, H, W, C) as Keras feeds it
            x = x.permute(0, 1, 4, 2, 3)
            h = torch.zeros(x.shape[0], 16, x.shape[3], x.shape[4])
            c = torch.zeros_like(h)
            for t in range(x.shape[1]):
                i, f, g, o = self.conv(torch.cat([x[:, t], h], dim=1)).chunk(4, dim=1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
            return h

    class Pool(nn.Module):
        def forward(self, x):
            return x.mean(dim=(2, 3))
    return [ConvLstm(), Pool(), nn.Linear(16, 10)]


case("conv_lstm2d", 16, [8, 16, 16, 8], _conv_lstm_layers(), _conv_lstm_torch)


def model_config(name):
    """A Sequential model of the case's layers; a functional chain (Keras 2's form) where a layer
    is called on [previous, previous] (self_call: attention over its own input) or on previous
    with value=previous (self_value: MultiHeadAttention's and GroupedQueryAttention's call)."""
    c = CASES[name]
    shape = [None] + c["input_shape"]
    if not any(layer.get("self_call") or layer.get("self_value") for layer in c["layers"]):
        layers = [keras("InputLayer", batch_input_shape=shape, name="x")]
        for i, layer in enumerate(c["layers"]):
            layers.append({"class_name": layer["class_name"],
                           "config": dict(layer["config"], name=f"layer_{i}")})
        return {"class_name": "Sequential", "config": {"name": name, "layers": layers}}
    layers = [{"class_name": "InputLayer", "name": "x", "inbound_nodes": [],
               "config": {"batch_input_shape": shape, "name": "x"}}]
    previous = "x"
    for i, layer in enumerate(c["layers"]):
        calls = 2 if layer.get("self_call") else 1
        options = {"value": [previous, 0, 0]} if layer.get("self_value") else {}
        layers.append({"class_name": layer["class_name"], "name": f"layer_{i}",
                       "config": dict(layer["config"], name=f"layer_{i}"),
                       "inbound_nodes": [[[previous, 0, 0, options]] * calls]})
        previous = f"layer_{i}"
    return {"class_name": "Functional",
            "config": {"name": name, "layers": layers, "input_layers": [["x", 0, 0]],
                       "output_layers": [[previous, 0, 0]]}}


def run_config(name):
    c = CASES[name]
    return {
        "name": name, "seed": 1, "batch_size": c["batch"], "devices": "cpu",
        "model": model_config(name),
        "optimizer": keras("Adam", learning_rate=0.001),
        "loss": keras("SparseCategoricalCrossentropy", from_logits=True),
        "data": {"train": {"type": "synthetic", "samples": 1024, "x_shape": c["input_shape"],
                           "task": "classes", "classes": 10, "seed": 0}},
    }


# Self-attention over 20 steps of 64 features (Bahdanau's additive scores, or Luong's dot
# product), between a Dense and the pooling to 10 logits: Keras' AdditiveAttention / Attention
# called on [x, x] (a functional model), against the same arithmetic in torch operations.
def _attention_layers(cls):
    layers = [keras("Dense", units=64, activation="tanh")]
    if cls:
        layers.append(dict(keras(cls), self_call=True))
    return layers + [keras("GlobalAveragePooling1D"), keras("Dense", units=10)]


def _attention_torch(cls):
    def build(nn):
        import torch

        class SelfAttention(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.rand(64) - 0.5)

            def forward(self, x):
                if cls == "AdditiveAttention":  # Σ_d scale[d] tanh(q[d] + k[d])
                    scores = (torch.tanh(x[:, :, None, :] + x[:, None, :, :]) * self.scale).sum(-1)
                else:
                    scores = x @ x.transpose(1, 2)
                return torch.softmax(scores, dim=-1) @ x

        class Pool(nn.Module):
            def forward(self, x):
                return x.mean(dim=1)
        layers = [nn.Linear(64, 64), nn.Tanh()]
        if cls:
            layers.append(SelfAttention())
        return layers + [Pool(), nn.Linear(64, 10)]
    return build


case("additive_attention", 64, [20, 64], _attention_layers("AdditiveAttention"),
     _attention_torch("AdditiveAttention"))
case("dot_attention", 64, [20, 64], _attention_layers("Attention"), _attention_torch("Attention"))
case("attention_base", 64, [20, 64], _attention_layers(None), _attention_torch(None))


# A Llama-style block over 32 steps of 128 features: RMSNormalization, then causal-free grouped
# query self-attention (8 query heads over 2 key/value heads of 16), pooled to 10 logits; against
# the same arithmetic in torch operations (torch 1.13 has neither layer: RMSNorm written out,
# the key/value heads repeat_interleave'd, the product attention by matmul and softmax).
def _gqa_layers(with_attention):
    layers = [keras("Dense", units=128, activation="relu"), keras("RMSNormalization")]
    if with_attention:
        layers.append(dict(keras("GroupedQueryAttention", head_dim=16, num_query_heads=8,
                                 num_key_value_heads=2), self_value=True))
    return layers + [keras("GlobalAveragePooling1D"), keras("Dense", units=10)]


def _gqa_torch(with_attention):
    def build(nn):
        import torch

        class RmsNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(128))

            def forward(self, x):
                return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.scale

        class Gqa(nn.Module):
            def __init__(self):
                super().__init__()
                self.q, self.k, self.v = nn.Linear(128, 128), nn.Linear(128, 32), nn.Linear(128, 32)
                self.out = nn.Linear(128, 128)

            def forward(self, x):
                b, t, _ = x.shape
                q = self.q(x).view(b, t, 8, 16).transpose(1, 2) * 0.25
                k = self.k(x).view(b, t, 2, 16).transpose(1, 2).repeat_interleave(4, dim=1)
                v = self.v(x).view(b, t, 2, 16).transpose(1, 2).repeat_interleave(4, dim=1)
                p = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
                return self.out((p @ v).transpose(1, 2).reshape(b, t, 128))

        class Pool(nn.Module):
            def forward(self, x):
                return x.mean(dim=1)
        layers = [nn.Linear(128, 128), nn.ReLU(), RmsNorm()]
        if with_attention:
            layers.append(Gqa())
        return layers + [Pool(), nn.Linear(128, 10)]
    return build


case("grouped_query_attention", 64, [32, 128], _gqa_layers(True), _gqa_torch(True))
case("grouped_query_attention_base", 64, [32, 128], _gqa_layers(False), _gqa_torch(False))


def torch_samples_per_s(name, channels_last, steps=64, warmup=5):
    import torch
    from torch import nn
    c = CASES[name]
    model = nn.Sequential(*c["torch_layers"](nn))
    shape = list(c["input_shape"])
    if c["image"]:  # channels first: (c, h, w), or a volume's (c, d, h, w)
        shape = [shape[-1]] + shape[:-1]
    xs = [torch.rand([c["batch"]] + shape) for _ in range(4)]
    ys = [torch.randint(0, 10, (c["batch"],)) for _ in range(4)]
    if channels_last:
        layout = torch.channels_last if len(shape) == 3 else torch.channels_last_3d
        model = model.to(memory_format=layout)
        xs = [x.contiguous(memory_format=layout) for x in xs]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(xs[i % 4]), ys[i % 4]).backward()
        optimizer.step()

    for i in range(warmup):
        step(i)
    rates = []
    for chunk in range(8):
        t0 = time.perf_counter()
        for i in range(steps // 8):
            step(i)
        rates.append(c["batch"] * (steps // 8) / (time.perf_counter() - t0))
    return statistics.median(rates)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--list", action="store_true")
    p.add_argument("--config")
    p.add_argument("--torch")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    if a.config:
        if a.config not in CASES:
            sys.exit(f"layer_cases.py: no case {a.config!r} (--list names them)")
        json.dump(run_config(a.config), sys.stdout, indent=1)
        print()
        return 0
    if a.torch:
        if a.torch not in CASES:
            sys.exit(f"layer_cases.py: no case {a.torch!r} (--list names them)")
        import torch
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from torch_blas import keep_freed_memory, require_openblas_with_the_cpus_kernels
        keep_freed_memory("layer_cases")
        require_openblas_with_the_cpus_kernels("layer_cases")
        torch.set_num_threads(a.threads)
        layouts = [False, True] if CASES[a.torch]["image"] else [False]
        best = max(torch_samples_per_s(a.torch, layout) for layout in layouts)
        print(json.dumps({"case": a.torch, "threads": a.threads, "samples_per_s": best}))
        return 0
    p.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
