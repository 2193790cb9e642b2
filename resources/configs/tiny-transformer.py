#!/usr/bin/python3
"""Writes tiny-transformer.json beside this file: a small BERT-style encoder as a Keras 3
functional config (what `model.to_json()` writes for the same Keras 3 code, keras_hub's
PositionEmbedding included), on a seeded synthetic task that needs attention: is the first token
of a 16-token sequence repeated later?

    tokens = Input((16,))
    t = Embedding(32, 32, embeddings_initializer=RandomNormal(stddev=1))(tokens)
    p = PositionEmbedding(16, initializer=RandomNormal(stddev=0.1))(t)   # keras_hub.layers
    h = Add()([t, p])
    for block in range(2):                                       # 2 encoder blocks
        a = MultiHeadAttention(num_heads=4, key_dim=8)(h, h)
        h = LayerNormalization(epsilon=1e-6)(Add()([h, a]))
        f = Dense(32)(Dense(64, activation="relu")(h))
        h = LayerNormalization(epsilon=1e-6)(Add()([h, f]))
    y = Dense(1, activation="sigmoid")(GlobalAveragePooling1D()(h))

Run: resources/configs/tiny-transformer.py
"""
import json
import os

SEQUENCE, VOCABULARY, WIDTH, HEADS, KEY_DIM, HIDDEN, BLOCKS = 16, 32, 32, 4, 8, 64, 2

counts = {}
layers = []


def name_for(base):
    n = counts.get(base, 0)
    counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def tensor(name):
    return {"class_name": "__keras_tensor__",
            "config": {"shape": None, "dtype": "float32", "keras_history": [name, 0, 0]}}


def call(cls, base, config, args, kwargs=None, module="keras.layers"):
    name = name_for(base)
    layers.append({"module": module, "class_name": cls, "name": name,
                   "config": dict(config, name=name, trainable=True, dtype="float32"),
                   "inbound_nodes": [{"args": args, "kwargs": kwargs or {}}]})
    return name


def dense(x, units, activation="linear"):
    return call("Dense", "dense", {"units": units, "activation": activation, "use_bias": True},
                [tensor(x)])


def add(a, b):
    return call("Add", "add", {}, [[tensor(a), tensor(b)]])


def norm(x):
    return call("LayerNormalization", "layer_normalization",
                {"axis": -1, "epsilon": 1e-6, "center": True, "scale": True}, [tensor(x)])


layers.append({"module": "keras.layers", "class_name": "InputLayer", "name": "tokens",
               "config": {"batch_shape": [None, SEQUENCE], "dtype": "float32", "sparse": False,
                          "name": "tokens"}, "inbound_nodes": []})
# Unit-variance token vectors and small position vectors (PyTorch's nn.Embedding default, not
# Keras' uniform(-0.05, 0.05)): with Keras' the attention takes far longer to find the first
# token (measured in docs/benchmarks.md).
t = call("Embedding", "embedding",
         {"input_dim": VOCABULARY, "output_dim": WIDTH,
          "embeddings_initializer": {"class_name": "RandomNormal",
                                     "config": {"mean": 0.0, "stddev": 1.0, "seed": None}}},
         [tensor("tokens")])
p = call("PositionEmbedding", "position_embedding",
         {"sequence_length": SEQUENCE,
          "initializer": {"class_name": "RandomNormal",
                          "config": {"mean": 0.0, "stddev": 0.1, "seed": None}}},
         [tensor(t)], module="keras_hub.layers")
h = add(t, p)
for _ in range(BLOCKS):
    a = call("MultiHeadAttention", "multi_head_attention",
             {"num_heads": HEADS, "key_dim": KEY_DIM, "value_dim": KEY_DIM, "dropout": 0.0,
              "use_bias": True, "output_shape": None, "attention_axes": None},
             [tensor(h), tensor(h)])
    h = norm(add(h, a))
    f = dense(dense(h, HIDDEN, "relu"), WIDTH)
    h = norm(add(h, f))
g = call("GlobalAveragePooling1D", "global_average_pooling1d",
         {"data_format": "channels_last", "keepdims": False}, [tensor(h)])
y = dense(g, 1, "sigmoid")

model = {"module": "keras", "class_name": "Functional",
         "config": {"name": "tiny_transformer", "trainable": True, "layers": layers,
                    "input_layers": ["tokens", 0, 0], "output_layers": [y, 0, 0]}}


def synthetic(samples, seed):
    return {"type": "synthetic", "task": "repeated_token", "samples": samples,
            "x_shape": [SEQUENCE], "vocabulary": VOCABULARY, "seed": seed}


run = {"name": "tiny-transformer", "seed": 42, "epochs": 10, "batch_size": 64, "devices": "cpu",
       "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.001}},
       "loss": "binary_crossentropy", "metrics": ["accuracy"], "model": model,
       "data": {"train": synthetic(20000, 1), "validation": synthetic(2000, 2)}}

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny-transformer.json"),
          "w") as f:
    json.dump(run, f, indent=1)
    f.write("\n")
