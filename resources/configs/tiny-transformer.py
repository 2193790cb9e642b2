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
from keras_config import Keras3Graph, normal, tensor, write_beside

SEQUENCE, VOCABULARY, WIDTH, HEADS, KEY_DIM, HIDDEN, BLOCKS = 16, 32, 32, 4, 8, 64, 2

g = Keras3Graph()
g.input("tokens", [SEQUENCE])
# Unit-variance token vectors and small position vectors (PyTorch's nn.Embedding default, not
# Keras' uniform(-0.05, 0.05)): with Keras' the attention takes far longer to find the first
# token (measured in docs/benchmarks.md).
t = g.call("Embedding", "embedding",
           {"input_dim": VOCABULARY, "output_dim": WIDTH, "embeddings_initializer": normal(1.0)},
           [tensor("tokens")])
p = g.call("PositionEmbedding", "position_embedding",
           {"sequence_length": SEQUENCE, "initializer": normal(0.1)},
           [tensor(t)], module="keras_hub.layers")
h = g.add(t, p)
for _ in range(BLOCKS):
    h = g.encoder_block(h, HEADS, KEY_DIM, HIDDEN, WIDTH, "relu", 1e-6)
pooled = g.call("GlobalAveragePooling1D", "global_average_pooling1d",
                {"data_format": "channels_last", "keepdims": False}, [tensor(h)])
y = g.dense(pooled, 1, "sigmoid")

model = {"module": "keras", "class_name": "Functional",
         "config": {"name": "tiny_transformer", "trainable": True, "layers": g.layers,
                    "input_layers": ["tokens", 0, 0], "output_layers": [y, 0, 0]}}


def synthetic(samples, seed):
    return {"type": "synthetic", "task": "repeated_token", "samples": samples,
            "x_shape": [SEQUENCE], "vocabulary": VOCABULARY, "seed": seed}


run = {"name": "tiny-transformer", "seed": 42, "epochs": 10, "batch_size": 64, "devices": "cpu",
       "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.001}},
       "loss": "binary_crossentropy", "metrics": ["accuracy"], "model": model,
       "data": {"train": synthetic(20000, 1), "validation": synthetic(2000, 2)}}
write_beside(__file__, "tiny-transformer.json", run)
