"""torch's fp32 GEMMs on the CPU, as the benchmarks need them: on OpenBLAS, with the CPU's kernels.

Debian's torch sends fp32 matrix products to libblas.so.3. The reference BLAS there is no anchor
(seed-mlp: 18 samples/s against 1,400 on OpenBLAS), so require_openblas_with_the_cpus_kernels()
exits when torch is on it (install libopenblas0-pthread; scripts/setup does).
"""
import ctypes
import os
import sys

import torch

# OpenBLAS kernel families for x86 CPUs with AVX2 or better. OpenBLAS 0.3.21 (Debian 12) does not
# know the newest cores and falls back to an old SSE kernel for them (an Emerald Rapids Xeon gets
# "Prescott": seed-mlp's fp32 step runs 4x slower than on its AVX-512 SkylakeX kernels), which is
# no anchor.
MODERN_KERNELS = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}


def kernel_the_cpu_deserves():
    """The OPENBLAS_CORETYPE for this CPU's instruction sets (/proc/cpuinfo), or None."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    if "avx512_bf16" in flags:
        return "COOPERLAKE"
    if "avx512f" in flags:
        return "SKYLAKEX"
    if "avx2" in flags:
        return "HASWELL"
    return None


def require_openblas_with_the_cpus_kernels(tool):
    """Exits unless torch's GEMMs run on OpenBLAS; re-executes this script with OPENBLAS_CORETYPE
    set when OpenBLAS took an AVX2/AVX-512 CPU for an older one and the environment does not
    choose the kernels itself."""
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # loads torch's BLAS
    with open("/proc/self/maps") as f:
        if "openblas" not in f.read():
            sys.exit(f"{tool}: torch's BLAS (libblas.so.3) is not OpenBLAS here, and the reference "
                     "BLAS is no anchor (seed-mlp: 18 samples/s). Install libopenblas0-pthread "
                     "(scripts/setup does).")
    info = openblas_info()
    deserved = kernel_the_cpu_deserves()
    if ("OPENBLAS_CORETYPE" in os.environ or deserved is None
            or info.get("corename", "").lower() in MODERN_KERNELS):
        return
    print(f"[{tool}] OpenBLAS took this CPU for {info.get('corename')}; rerunning with "
          f"OPENBLAS_CORETYPE={deserved}", file=sys.stderr, flush=True)
    env = dict(os.environ, OPENBLAS_CORETYPE=deserved,
               TORCH_BLAS_DETECTED_CORE=info.get("corename", ""))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


# Allocator settings that keep freed memory in the process, PyTorch at its best. PyTorch's CPU
# allocator hands each new tensor to malloc; memory given back to the kernel is touched afresh
# next step, which on a VM where a first touch costs 11 us a page (this project's Zen 5 VMs)
# makes the step mostly page faults. glibc keeps blocks up to 32 MiB (the most it allows) from
# the heap and never trims it with these (fashion-resnet 295-617 -> 875-995 samples/s there);
# larger blocks stay fresh mappings: seed-mlp's 32M-weight layer (a 64-128 MB tensor) still
# faulted 1M pages in 4 steps, 229 samples/s in bf16 at batch 256. jemalloc (Debian's
# libjemalloc2, scripts/setup), told never to return freed pages, keeps them all: 1,897 samples/s
# (2026-11-30). Tandem's allocator keeps such blocks itself.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "17179869184"}
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
KEEP_FREED_JEMALLOC = {"LD_PRELOAD": JEMALLOC, "MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"}
ALLOCATOR_SETTINGS = (*KEEP_FREED_MEMORY, *KEEP_FREED_JEMALLOC)


def keep_freed_memory(tool):
    """Re-executes this script with jemalloc keeping freed memory (glibc's thresholds where
    jemalloc is not installed) unless the environment chooses the allocator's settings itself
    (any of ALLOCATOR_SETTINGS): PyTorch at its best."""
    if any(name in os.environ for name in ALLOCATOR_SETTINGS):
        return
    settings = KEEP_FREED_JEMALLOC if os.path.exists(JEMALLOC) else KEEP_FREED_MEMORY
    print(f"[{tool}] rerunning with the allocator keeping freed memory "
          f"({' '.join(k + '=' + v for k, v in settings.items())})",
          file=sys.stderr, flush=True)
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **settings))


def openblas_info():
    """Which OpenBLAS kernels and thread count torch's GEMMs (BLAS_INFO=generic -> libblas.so.3) use."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        return {
            "corename": lib.openblas_get_corename().decode(),
            "config": lib.openblas_get_config().decode(),
            "threads": lib.openblas_get_num_threads(),
        }
    except OSError as e:
        return {"error": str(e)}
