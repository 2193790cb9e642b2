#!/usr/bin/python3
"""Writes fashion-resnet.json beside this file: a ResNet-20-style network for Fashion-MNIST as a
Keras 2 functional config (what `model.to_json()` writes for the same Keras code):

    x = Reshape((28, 28, 1))(Input((28, 28)))
    x = relu(BN(Conv2D(16, 3, padding="same", use_bias=False)(x)))
    for filters, first_stride in ((16, 1), (32, 2), (64, 2)):   # 3 stages
        for block in range(3):                                  # of 3 residual blocks
            stride = first_stride if block == 0 else 1
            h = relu(BN(Conv2D(filters, 3, stride, "same", use_bias=False)(x)))
            h = BN(Conv2D(filters, 3, padding="same", use_bias=False)(h))
            shortcut = x if stride == 1 and x has `filters` channels else
                       BN(Conv2D(filters, 1, stride, use_bias=False)(x))     # projection
            x = relu(Add()([h, shortcut]))
    logits = Dense(10)(GlobalAveragePooling2D()(x))

Layer names follow Keras' numbering (conv2d, conv2d_1, ...). Run: resources/configs/fashion-resnet.py
"""
from keras_config import Names, write_beside

name_for = Names()
layers = []


def call(cls, base, config, *inputs):
    name = name_for(base)
    config = dict(config, name=name)
    layers.append({"class_name": cls, "name": name, "config": config,
                   "inbound_nodes": [[[i, 0, 0, {}] for i in inputs]] if inputs else []})
    return name


def conv(x, filters, kernel, stride):
    return call("Conv2D", "conv2d", {"filters": filters, "kernel_size": [kernel, kernel],
                                     "strides": [stride, stride], "padding": "same",
                                     "use_bias": False, "kernel_initializer": "he_normal"}, x)


def bn(x):
    return call("BatchNormalization", "batch_normalization", {"momentum": 0.9, "epsilon": 1e-5}, x)


def relu(x):
    return call("Activation", "activation", {"activation": "relu"}, x)


image = call("InputLayer", "image", {"batch_input_shape": [None, 28, 28]})
x = call("Reshape", "reshape", {"target_shape": [28, 28, 1]}, image)
x = relu(bn(conv(x, 16, 3, 1)))
channels = 16
for filters, first_stride in ((16, 1), (32, 2), (64, 2)):
    for block in range(3):
        stride = first_stride if block == 0 else 1
        h = relu(bn(conv(x, filters, 3, stride)))
        h = bn(conv(h, filters, 3, 1))
        shortcut = x
        if stride != 1 or channels != filters:
            shortcut = bn(conv(x, filters, 1, stride))
        x = relu(call("Add", "add", {}, h, shortcut))
        channels = filters
x = call("GlobalAveragePooling2D", "global_average_pooling2d", {}, x)
logits = call("Dense", "logits", {"units": 10}, x)

fashion = "/usr/share/datasets/fashion-mnist/"
run = {
    "name": "fashion-resnet",
    "seed": 42,
    "epochs": 15,
    "batch_size": 128,
    "devices": "cpu",
    # AdamW with a cosine decay per step: 0.9308 after 11 epochs, where plain Adam at a constant
    # 1e-3 plateaus near 0.92 (docs/benchmarks.md, "fashion-resnet's accuracy").
    "optimizer": {"class_name": "AdamW",
                  "config": {"learning_rate": 0.002, "weight_decay": 0.05}},
    "callbacks": [{"plugin": "lr_scheduler",
                   "options": {"schedule": "cosine", "interval": "step"}}],
    "loss": {"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": True}},
    "metrics": ["accuracy"],
    "model": {"class_name": "Functional",
              "config": {"name": "fashion_resnet", "layers": layers,
                         "input_layers": [[image, 0, 0]], "output_layers": [[logits, 0, 0]]},
              "keras_version": "2.15.0", "backend": "tensorflow"},
    "data": {
        "train": {"type": "idx", "x": fashion + "train-images-idx3-ubyte.gz",
                  "y": fashion + "train-labels-idx1-ubyte.gz"},
        "validation": {"type": "idx", "x": fashion + "t10k-images-idx3-ubyte.gz",
                       "y": fashion + "t10k-labels-idx1-ubyte.gz"},
    },
}
out = write_beside(__file__, "fashion-resnet.json", run)
print(f"wrote {out}: {len(layers)} layers")
