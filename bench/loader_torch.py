#!/usr/bin/python3
"""The PIL + NumPy baseline of bench/loader_compare: an image folder read by a PyTorch
DataLoader with WORKERS worker processes, each sample opened with PIL, converted, resized
(bilinear), scaled to [0, 1] and augmented as loader_bench does (a horizontal flip, a shift of
up to 10% with zero fill, a contrast change), batched by the DataLoader. No torchvision.

  loader_torch.py FOLDER ROWS COLS COLOR_MODE WORKERS BATCH SECONDS
"""
import json
import os
import sys
import time

import numpy as np
import torch
from PIL import Image


class Folder(torch.utils.data.Dataset):
    def __init__(self, root, rows, cols, mode):
        self.items = []
        for label, name in enumerate(sorted(os.listdir(root))):
            for f in sorted(os.listdir(os.path.join(root, name))):
                self.items.append((os.path.join(root, name, f), label))
        self.size = (cols, rows)
        self.mode = {"grayscale": "L", "rgb": "RGB", "rgba": "RGBA"}[mode]
        self.rng = np.random.default_rng(os.getpid())

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with Image.open(path) as im:
            im = im.convert(self.mode)
            if im.size != self.size:
                im = im.resize(self.size, Image.BILINEAR)
            a = np.asarray(im, dtype=np.float32) / 255.0
        if a.ndim == 2:
            a = a[:, :, None]
        if self.rng.random() < 0.5:
            a = a[:, ::-1]
        h, w = a.shape[:2]
        dy = int(round(self.rng.uniform(-0.1, 0.1) * h))
        dx = int(round(self.rng.uniform(-0.1, 0.1) * w))
        shifted = np.zeros_like(a)
        shifted[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
            a[max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
        f = self.rng.uniform(0.8, 1.2)
        mean = shifted.mean(axis=(0, 1), keepdims=True)
        out = np.clip((shifted - mean) * f + mean, 0.0, 1.0)
        return torch.from_numpy(np.ascontiguousarray(out)), label


def main():
    folder, rows, cols, mode, workers, batch, seconds = sys.argv[1:8]
    torch.set_num_threads(1)
    data = Folder(folder, int(rows), int(cols), mode)
    loader = torch.utils.data.DataLoader(data, batch_size=int(batch), shuffle=True,
                                         num_workers=int(workers), persistent_workers=True,
                                         prefetch_factor=2)
    images, start = 0, None
    while True:
        for x, _ in loader:
            if start is None:  # the workers have started: time from the first batch on
                start = time.perf_counter()
                continue
            images += x.shape[0]
            if time.perf_counter() - start >= float(seconds):
                elapsed = time.perf_counter() - start
                print(json.dumps({"images_per_sec": images / elapsed, "images": images,
                                  "seconds": elapsed, "workers": int(workers)}))
                return


if __name__ == "__main__":
    main()
