#!/usr/bin/python3
"""Writes Fashion-MNIST (or any IDX image/label pair) as image folders, as Keras'
image_dataset_from_directory reads them: OUT/<class name>/<index>.<png|jpg>.

  write_image_folders.py IMAGES.gz LABELS.gz OUT --format png|jpeg [--count N] [--size R C]
                         [--rgb] [--quality Q] [--list labels.csv]

PIL writes the files, so Tandem's decoders are checked against another library's encoder.
--size resizes with PIL's bilinear filter first (larger images, for the decode benchmark);
--rgb writes three-channel files; --list also writes a CSV of path,label.
"""
import argparse
import gzip
import os

import numpy as np
from PIL import Image

# Prefixed with the label so that the sorted folder names keep Fashion-MNIST's label order.
CLASSES = [f"{k}-{name}" for k, name in enumerate(
    ["t-shirt", "trouser", "pullover", "dress", "coat",
     "sandal", "shirt", "sneaker", "bag", "ankle-boot"])]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("images")
    p.add_argument("labels")
    p.add_argument("out")
    p.add_argument("--format", choices=["png", "jpeg"], default="png")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--size", type=int, nargs=2, default=None)
    p.add_argument("--rgb", action="store_true")
    p.add_argument("--quality", type=int, default=95)
    p.add_argument("--list", default=None)
    a = p.parse_args()
    images, labels = read_idx(a.images), read_idx(a.labels)
    n = a.count or len(labels)
    ext = "png" if a.format == "png" else "jpg"
    for c in CLASSES:
        os.makedirs(os.path.join(a.out, c), exist_ok=True)
    rows = []
    for i in range(n):
        img = Image.fromarray(images[i], mode="L")
        if a.rgb:
            # A colour image whose channels differ: red the pixel, green its mirror, blue inverted.
            arr = images[i]
            img = Image.fromarray(np.stack([arr, arr[:, ::-1], 255 - arr], axis=-1), mode="RGB")
        if a.size:
            img = img.resize((a.size[1], a.size[0]), Image.BILINEAR)
        rel = os.path.join(CLASSES[labels[i]], f"{i:05d}.{ext}")
        if a.format == "png":
            img.save(os.path.join(a.out, rel))
        else:
            img.save(os.path.join(a.out, rel), quality=a.quality)
        rows.append((rel, CLASSES[labels[i]]))
    if a.list:
        with open(a.list, "w") as f:
            f.write("path,label\n")
            for rel, label in rows:
                f.write(f"{rel},{label}\n")


if __name__ == "__main__":
    main()
