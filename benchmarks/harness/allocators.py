"""The memory allocator of a benchmark worker, chosen by ``--allocator``.

glibc's malloc returns large blocks (over 128 KB) to the system on free()
and maps them again on the next malloc(): every step of PyTorch's eager mode
then page-faults its large tensors (the 65 MB logits of base among them)
back in, and the kernel zeroes each page, where minitrans reuses its
buffers. PyTorch's CPU performance guide recommends an allocator that keeps
freed memory: glibc with these tunables, jemalloc or tcmalloc. Both
libraries get the same one.

    tuned     glibc malloc that never unmaps freed memory (GLIBC_TUNABLES)
    jemalloc  libjemalloc, loaded before glibc's malloc by LD_PRELOAD, told
              never to purge freed pages (MALLOC_CONF)
    tcmalloc  libtcmalloc, the same way (TCMALLOC_RELEASE_RATE=0)
    default   glibc malloc as it comes: the untuned figure

jemalloc as it comes purges freed pages after 10 s and hands blocks of 8 MB
and more to an arena that purges at once: it page-faulted a loop of 65 MB
tensors as often as glibc's default (32,000 faults an iteration; 1,600 with
the setting below), and so did the settings of PyTorch's guide, which set
oversize_threshold:1.
"""

import os
import sys

# mmap_max=0: large blocks come from the heap, not from mmap of their own;
# trim_threshold=64 GiB: free() never hands the heap's top back to the system
TUNED_MALLOC = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"
PRELOADED = {  # allocator: its shared library's names, the first found is used
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
    "tcmalloc": ("libtcmalloc.so.4", "libtcmalloc_minimal.so.4", "libtcmalloc.so"),
}
KEEP_FREED = {  # a preloaded allocator's setting that keeps freed pages mapped
    "jemalloc": {"MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
    "tcmalloc": {"TCMALLOC_RELEASE_RATE": "0"},
}
ALLOCATORS = ("tuned", *PRELOADED, "default")
INSTALL_HINT = {"jemalloc": "apt-get install libjemalloc2 or conda install jemalloc",
                "tcmalloc": "apt-get install libgoogle-perftools4 or conda install gperftools"}
# what a worker's allocator depends on: removed from every worker's
# environment before its own allocator's settings are added
ALLOCATOR_VARIABLES = ("GLIBC_TUNABLES", "LD_PRELOAD", "MALLOC_CONF", "TCMALLOC_RELEASE_RATE")


def library_dirs():
    """Where shared libraries are installed: the environment's own (conda)
    first, then the system's usual folders."""
    machine = os.uname().machine
    return (os.path.join(sys.prefix, "lib"), f"/usr/lib/{machine}-linux-gnu",
            "/usr/lib64", "/usr/lib", "/usr/local/lib")


def find_library(allocator, dirs=None):
    """The path of ``allocator``'s shared library, or None if none is installed."""
    for folder in library_dirs() if dirs is None else dirs:
        for name in PRELOADED[allocator]:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return path
    return None


def allocator_env(allocator, dirs=None):
    """The environment variables that give a worker ``allocator``: a dict
    to add to an environment without ALLOCATOR_VARIABLES. Raises ValueError
    for an unknown allocator or one that is not installed."""
    if allocator not in ALLOCATORS:
        raise ValueError(f"allocator: expected one of {', '.join(ALLOCATORS)}, "
                         f"got {allocator!r}")
    if allocator == "tuned":
        return {"GLIBC_TUNABLES": TUNED_MALLOC}
    if allocator == "default":
        return {}
    path = find_library(allocator, dirs)
    if path is None:
        folders = ", ".join(library_dirs() if dirs is None else dirs)
        raise ValueError(f"allocator: {allocator} is not installed (no "
                         f"{' or '.join(PRELOADED[allocator])} in {folders}); install it "
                         f"({INSTALL_HINT[allocator]}) or use --allocator tuned")
    return {"LD_PRELOAD": path, **KEEP_FREED[allocator]}


def worker_env(allocator, base=None, dirs=None):
    """``base`` (default: this process's environment) with the allocator
    variables replaced by ``allocator``'s."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k not in ALLOCATOR_VARIABLES}
    return {**env, **allocator_env(allocator, dirs)}


def allocator_in_use(maps_path="/proc/self/maps"):
    """Which allocator this process runs, seen from inside: a preloaded
    library mapped into it, else glibc's malloc, tuned or not."""
    try:
        with open(maps_path) as handle:
            mapped = {os.path.basename(line.split()[-1]) for line in handle if "/" in line}
    except OSError:
        mapped = set()
    for allocator, names in PRELOADED.items():
        found = sorted(name for name in mapped if name.startswith(names[0].split(".so")[0]))
        if found:
            settings = [f"{k}={os.environ[k]}" for k in KEEP_FREED[allocator] if k in os.environ]
            return f"{allocator} ({', '.join(found[:1] + settings)})"
    tunables = os.environ.get("GLIBC_TUNABLES")
    if tunables == TUNED_MALLOC:
        return "glibc malloc, tuned (mmap_max=0, trim_threshold=64 GiB)"
    return f"glibc malloc, GLIBC_TUNABLES={tunables}" if tunables else "glibc malloc, default"
