#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets that need made inputs (run once; the seeds are
committed). FuzzedDataProvider takes its choices (integers, booleans) from the END of an input
and its byte strings from the front, so each seed is laid out as: strings..., then the choice
bytes in reverse order of consumption."""
import gzip
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
FASHION = "/usr/share/datasets/fashion-mnist"


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def idx_head(path, samples):
    """The header and first `samples` records of a gzip IDX file, with the count set to them."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    record = 1
    for d in dims[1:]:
        record *= d
    head = bytearray(data[:4 + 4 * ndim])
    head[4:8] = samples.to_bytes(4, "big")
    return bytes(head) + data[4 + 4 * ndim:4 + 4 * ndim + samples * record]


def idx_seed(x, y, gzip_x, gzip_y):
    # Consumed: gzip_x (last byte), gzip_y, then len(y) over two bytes (high byte first).
    return y + x + bytes([len(y) & 0xFF, len(y) >> 8, gzip_y, gzip_x])


x = idx_head(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz"), 3)
y = idx_head(os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz"), 3)
write("idx_fuzz", "fashion-3-plain", idx_seed(x, y, 0, 0))
write("idx_fuzz", "fashion-3-gzip", idx_seed(x, y, 1, 1))
write("idx_fuzz", "short-header", idx_seed(x[:6], y[:9], 0, 1))

rng = random.Random(7)
for i in range(8):
    write("hdf5_dataset_fuzz", "random-%d" % i, bytes(rng.randrange(256) for _ in range(96)))
    write("checkpoint_fuzz", "random-%d" % i, bytes(rng.randrange(256) for _ in range(160)))

# npy_fuzz: .npy files of several dtypes and shapes, and .npz archives (stored and deflated)
# holding x and y, as NumPy writes them.
import io  # noqa: E402
import numpy as np  # noqa: E402


def npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def npz_bytes(compressed, **arrays):
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


grid = np.arange(24).reshape(4, 6)
for dtype in ["<f4", ">f8", "<f2", "|u1", "<i2", ">u4", "<i8", "|b1"]:
    write("npy_fuzz", "npy-" + dtype.replace("<", "le-").replace(">", "be-").replace("|", ""),
          npy_bytes((grid % 5 - 2).astype(dtype)))
write("npy_fuzz", "npy-scalar", npy_bytes(np.float32(1.5)))
write("npy_fuzz", "npy-fortran", npy_bytes(np.asfortranarray(grid.astype("<f4"))))
labels = np.arange(4, dtype=np.int64)
write("npy_fuzz", "npz-stored", npz_bytes(False, x=grid.astype(np.float32), y=labels))
write("npy_fuzz", "npz-deflated", npz_bytes(True, x=grid.astype(np.uint8), y=labels))

# csv_fuzz: tables with the target column y and the category column c.
write("csv_fuzz", "plain", b"x1,x2,c,y\n1,2.5,a,0\n-3e2,0,b,1\n")
write("csv_fuzz", "quoted-crlf", b"\"x, 1\",c,y\r\n\"1\",\"b\",\"2\"\r\n4,a,\"\"\"5\"\"\"\r\n")
write("csv_fuzz", "ragged", b"x,c,y\n1,a\n2,b,3,4\n")

# image_fuzz: small PNGs (grey, RGB, RGBA, palette with transparency, 16-bit, 1-bit, interlaced)
# and JPEGs (grey, colour, progressive, 4:2:0), each 9x7 with a pattern.
from PIL import Image  # noqa: E402

pattern = (np.arange(63).reshape(9, 7) * 4).astype(np.uint8)
rgb = np.stack([pattern, pattern[::-1], 255 - pattern], axis=-1)


def image_bytes(image, fmt, **options):
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


write("image_fuzz", "png-grey", image_bytes(Image.fromarray(pattern, "L"), "PNG"))
write("image_fuzz", "png-rgb", image_bytes(Image.fromarray(rgb, "RGB"), "PNG"))
write("image_fuzz", "png-rgba", image_bytes(
    Image.fromarray(np.concatenate([rgb, pattern[..., None]], -1), "RGBA"), "PNG"))
palette = Image.fromarray(rgb, "RGB").quantize(8)
write("image_fuzz", "png-palette-transparent", image_bytes(palette, "PNG", transparency=0))
write("image_fuzz", "png-16bit", image_bytes(
    Image.fromarray(pattern.astype(np.int32) * 257, "I"), "PNG", bits=16))
write("image_fuzz", "png-1bit", image_bytes(Image.fromarray(pattern > 128), "PNG"))
write("image_fuzz", "png-interlaced", image_bytes(Image.fromarray(rgb, "RGB"), "PNG", interlace=1))
write("image_fuzz", "jpeg-grey", image_bytes(Image.fromarray(pattern, "L"), "JPEG", quality=90))
write("image_fuzz", "jpeg-rgb", image_bytes(Image.fromarray(rgb, "RGB"), "JPEG", quality=90))
write("image_fuzz", "jpeg-progressive", image_bytes(
    Image.fromarray(rgb, "RGB"), "JPEG", quality=75, progressive=True, subsampling=2))
