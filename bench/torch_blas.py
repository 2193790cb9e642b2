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


# glibc settings that keep freed memory in the process: blocks up to 32 MiB (the most glibc
# allows) from the heap instead of fresh mappings, and the heap never trimmed. PyTorch's CPU
# allocator hands each new tensor to malloc; with glibc's defaults its element-wise outputs land
# in memory returned to the kernel and touched afresh, which on a VM where a first touch costs
# 11 us a page (this project's 2026-11-28 Zen 5 VM) slowed its fashion-resnet step 2-3x
# (295-617 samples/s against 875-995 with these). Tandem's allocator keeps such blocks itself.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "17179869184"}


def keep_freed_memory(tool):
    """Re-executes this script with KEEP_FREED_MEMORY unless the environment sets glibc's
    thresholds itself (any of them): PyTorch at its best."""
    if any(name in os.environ for name in KEEP_FREED_MEMORY):
        return
    print(f"[{tool}] rerunning with glibc keeping freed memory "
          f"({' '.join(k + '=' + v for k, v in KEEP_FREED_MEMORY.items())})",
          file=sys.stderr, flush=True)
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **KEEP_FREED_MEMORY))


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
