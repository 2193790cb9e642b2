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
from keras_config import Keras3Graph, normal, tensor, write_beside

SEQUENCE, VOCABULARY, WIDTH, HEADS, KEY_DIM, HIDDEN, BLOCKS = 24, 32, 32, 4, 8, 64, 2

g = Keras3Graph()
g.input("tokens", [SEQUENCE])
g.input("segments", [SEQUENCE])
t = g.call("Embedding", "embedding",
           {"input_dim": VOCABULARY, "output_dim": WIDTH, "embeddings_initializer": normal(1.0)},
           [tensor("tokens")])
s = g.call("Embedding", "embedding",
           {"input_dim": 2, "output_dim": WIDTH, "embeddings_initializer": normal(1.0)},
           [tensor("segments")])
p = g.call("PositionEmbedding", "position_embedding",
           {"sequence_length": SEQUENCE, "initializer": normal(0.1)},
           [tensor(t)], module="keras_hub.layers")
h = g.norm(g.add(t, s, p), 1e-12)
for _ in range(BLOCKS):
    h = g.encoder_block(h, HEADS, KEY_DIM, HIDDEN, WIDTH, "gelu", 1e-12)
pooled = g.call("GlobalAveragePooling1D", "global_average_pooling1d",
                {"data_format": "channels_last", "keepdims": False}, [tensor(h)])
y = g.dense(pooled, 1, "sigmoid")

model = {"module": "keras", "class_name": "Functional",
         "config": {"name": "tiny_bert", "trainable": True, "layers": g.layers,
                    "input_layers": [["tokens", 0, 0], ["segments", 0, 0]],
                    "output_layers": [y, 0, 0]}}


def synthetic(samples, seed):
    return {"type": "synthetic", "task": "sentence_pair", "samples": samples,
            "x_shape": [SEQUENCE], "vocabulary": VOCABULARY, "seed": seed}


run = {"name": "tiny-bert", "seed": 42, "epochs": 10, "batch_size": 64, "devices": "cpu",
       "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.001}},
       "loss": "binary_crossentropy", "metrics": ["accuracy"], "model": model,
       "data": {"train": synthetic(20000, 1), "validation": synthetic(2000, 2)}}
write_beside(__file__, "tiny-bert.json", run)
