"""Helpers the resource-config scripts share (tiny-transformer.py, tiny-bert.py,
fashion-resnet.py): Keras' layer numbering, the Keras 3 functional form that `model.to_json()`
writes, and writing a run config beside the script."""
import json
import os


class Names:
    """Keras' default layer names: dense, dense_1, dense_2, ..."""

    def __init__(self):
        self.counts = {}

    def __call__(self, base):
        n = self.counts.get(base, 0)
        self.counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"


def tensor(name):
    """A Keras 3 call argument: the output of layer `name`."""
    return {"class_name": "__keras_tensor__",
            "config": {"shape": None, "dtype": "float32", "keras_history": [name, 0, 0]}}


class Keras3Graph:
    """The layers of a Keras 3 functional config, each added by the call that makes it."""

    def __init__(self):
        self.layers = []
        self.name_for = Names()

    def input(self, name, shape):
        self.layers.append({"module": "keras.layers", "class_name": "InputLayer", "name": name,
                            "config": {"batch_shape": [None] + list(shape), "dtype": "float32",
                                       "sparse": False, "name": name}, "inbound_nodes": []})
        return name

    def call(self, cls, base, config, args, kwargs=None, module="keras.layers"):
        name = self.name_for(base)
        self.layers.append({"module": module, "class_name": cls, "name": name,
                            "config": dict(config, name=name, trainable=True, dtype="float32"),
                            "inbound_nodes": [{"args": args, "kwargs": kwargs or {}}]})
        return name

    def dense(self, x, units, activation="linear"):
        return self.call("Dense", "dense",
                         {"units": units, "activation": activation, "use_bias": True},
                         [tensor(x)])

    def add(self, *xs):
        return self.call("Add", "add", {}, [[tensor(x) for x in xs]])

    def norm(self, x, epsilon):
        return self.call("LayerNormalization", "layer_normalization",
                         {"axis": -1, "epsilon": epsilon, "center": True, "scale": True},
                         [tensor(x)])

    def encoder_block(self, h, heads, key_dim, hidden, width, activation, epsilon):
        """Self-attention and a feed-forward network, each added back and normalized."""
        a = self.call("MultiHeadAttention", "multi_head_attention",
                      {"num_heads": heads, "key_dim": key_dim, "value_dim": key_dim,
                       "dropout": 0.0, "use_bias": True, "output_shape": None,
                       "attention_axes": None},
                      [tensor(h), tensor(h)])
        h = self.norm(self.add(h, a), epsilon)
        f = self.dense(self.dense(h, hidden, activation), width)
        return self.norm(self.add(h, f), epsilon)


def normal(stddev):
    return {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": stddev, "seed": None}}


def write_beside(script, filename, run):
    """Writes `run` as JSON into `filename` in the folder of `script`; returns its path."""
    out = os.path.join(os.path.dirname(os.path.abspath(script)), filename)
    with open(out, "w") as f:
        json.dump(run, f, indent=1)
        f.write("\n")
    return out
