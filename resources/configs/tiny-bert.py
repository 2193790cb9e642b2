#!/usr/bin/python3
"""Writes tiny-bert.json beside this file: a small BERT-style sentence-pair classifier as a
Keras 3 functional config — two inputs, token ids and segment ids, as BERT takes a pair of
sentences — on a seeded synthetic task that needs both: does the first token of segment A appear
in segment B (a repeat inside A does not count)?

    tokens, segments = Input((24,)), Input((24,))
    t = Embedding(32, 32, embeddings_initializer=RandomNormal(stddev=1))(tokens)
    s = Embedding(2, 32, embeddings_initializer=RandomNormal(stddev=1))(segments)
    p = PositionEmbedding(24, initializer=RandomNormal(stddev=0.1))(t)   # keras_hub.layers
    h = LayerNormalization(epsilon=1e-12)(Add()([t, s, p]))          # BERT's embedding sum
    for block in range(2):                                            # 2 encoder blocks
        a = MultiHeadAttention(num_heads=4, key_dim=8)(h, h)
        h = LayerNormalization(epsilon=1e-12)(Add()([h, a]))
        f = Dense(32)(Dense(64, activation="gelu")(h))
        h = LayerNormalization(epsilon=1e-12)(Add()([h, f]))
    y = Dense(1, activation="sigmoid")(GlobalAveragePooling1D()(h))

Run: resources/configs/tiny-bert.py
"""
import json
import os

SEQUENCE, VOCABULARY, WIDTH, HEADS, KEY_DIM, HIDDEN, BLOCKS = 24, 32, 32, 4, 8, 64, 2

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


def normal(stddev):
    return {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": stddev, "seed": None}}


def dense(x, units, activation="linear"):
    return call("Dense", "dense", {"units": units, "activation": activation, "use_bias": True},
                [tensor(x)])


def add(*xs):
    return call("Add", "add", {}, [[tensor(x) for x in xs]])


def norm(x):
    return call("LayerNormalization", "layer_normalization",
                {"axis": -1, "epsilon": 1e-12, "center": True, "scale": True}, [tensor(x)])


def model_input(name):
    layers.append({"module": "keras.layers", "class_name": "InputLayer", "name": name,
                   "config": {"batch_shape": [None, SEQUENCE], "dtype": "float32",
                              "sparse": False, "name": name}, "inbound_nodes": []})


model_input("tokens")
model_input("segments")
t = call("Embedding", "embedding",
         {"input_dim": VOCABULARY, "output_dim": WIDTH, "embeddings_initializer": normal(1.0)},
         [tensor("tokens")])
s = call("Embedding", "embedding",
         {"input_dim": 2, "output_dim": WIDTH, "embeddings_initializer": normal(1.0)},
         [tensor("segments")])
p = call("PositionEmbedding", "position_embedding",
         {"sequence_length": SEQUENCE, "initializer": normal(0.1)},
         [tensor(t)], module="keras_hub.layers")
h = norm(add(t, s, p))
for _ in range(BLOCKS):
    a = call("MultiHeadAttention", "multi_head_attention",
             {"num_heads": HEADS, "key_dim": KEY_DIM, "value_dim": KEY_DIM, "dropout": 0.0,
              "use_bias": True, "output_shape": None, "attention_axes": None},
             [tensor(h), tensor(h)])
    h = norm(add(h, a))
    f = dense(dense(h, HIDDEN, "gelu"), WIDTH)
    h = norm(add(h, f))
g = call("GlobalAveragePooling1D", "global_average_pooling1d",
         {"data_format": "channels_last", "keepdims": False}, [tensor(h)])
y = dense(g, 1, "sigmoid")

model = {"module": "keras", "class_name": "Functional",
         "config": {"name": "tiny_bert", "trainable": True, "layers": layers,
                    "input_layers": [["tokens", 0, 0], ["segments", 0, 0]],
                    "output_layers": [y, 0, 0]}}


def synthetic(samples, seed):
    return {"type": "synthetic", "task": "sentence_pair", "samples": samples,
            "x_shape": [SEQUENCE], "vocabulary": VOCABULARY, "seed": seed}


run = {"name": "tiny-bert", "seed": 42, "epochs": 10, "batch_size": 64, "devices": "cpu",
       "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.001}},
       "loss": "binary_crossentropy", "metrics": ["accuracy"], "model": model,
       "data": {"train": synthetic(20000, 1), "validation": synthetic(2000, 2)}}

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny-bert.json"), "w") as f:
    json.dump(run, f, indent=1)
    f.write("\n")
