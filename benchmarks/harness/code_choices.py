"""The choices the library's comments explain that are not kernel pairs:
each a slower way and the way the code takes, timed by kernels.py as
NumPy statements on the arrays the code meets.

Each is (where, what is timed, setup, the slower way, the code's way, BLAS
threads): the setup makes the arrays, both statements run on them.
"""

SCORES = ("import numpy as np; "
          "z = np.random.default_rng(0).standard_normal((32, 8, 64, 64)).astype(np.float32)")
ADAM = ("import numpy as np; from minitrans.training.optimisation.adam import adam_update as u; "
        "n = 15_000_000; p, g, m, v = (np.full(n, 1e-3, np.float32) for _ in range(4)); "
        "b = 2**17")
ROWS_INTO_TABLE = ("import numpy as np; V, N, d = 64, 2048, 256; rng = np.random.default_rng(0); "
                   "t = np.zeros((V, d), np.float32); i = rng.integers(0, V, N); "
                   "r = rng.standard_normal((N, d)).astype(np.float32)")
LOGITS = "import numpy as np; x = np.zeros((2048, 8000), np.float32); out = np.empty_like(x)"
CUBE = ("import numpy as np; "
        "a = np.random.default_rng(0).standard_normal(2048 * 1024).astype(np.float32)")
GATE = ("import numpy as np; a = (3 * np.random.default_rng(0).standard_normal((16, 128, 688)))"
        ".astype(np.float32); e = np.exp(-np.abs(a)); s = 1.0 / (1.0 + e)")
ADAM_CALL = "u({}, {}, {}, {}, 10, 1e-4, (0.9, 0.98), 1e-9)"

CHOICES = [
    ("minitrans/ops/softmax.py",
     "the scores' shift: a maximum per row of 64 keys, or per (64, 64) block", SCORES,
     "z.max(axis=-1, keepdims=True)", "z.max(axis=(-2, -1), keepdims=True)", None),
    ("minitrans/training/optimisation/optimizer.py",
     "Adam on 15 million float32 parameters: one array whole, or in blocks of 512 KB", ADAM,
     ADAM_CALL.format("p", "g", "m", "v"),
     "for s in range(0, n, b): " + ADAM_CALL.format(
         "p[s:s+b]", "g[s:s+b]", "m[s:s+b]", "v[s:s+b]"), None),
    ("minitrans/layers/embedding.py",
     "2048 rows of 256 added into a table of 64 rows: add.at on the flat table, or the "
     "one-hot product", ROWS_INTO_TABLE,
     "np.add.at(t.reshape(-1), (i[:, None] * d + np.arange(d)).reshape(-1), r.reshape(-1))",
     "t[...] += (i[:, None] == np.arange(V)).astype(np.float32).T @ r", 1),
    ("minitrans/layers/loss.py",
     "exp of the base config's (2048, 8000) logits: into a fresh array, or one that exists",
     LOGITS, "np.exp(x)", "np.exp(x, out=out)", None),
    ("minitrans/ops/activations.py", "gelu's cube of 2,097,152 numbers", CUBE, "a**3", "a*a*a",
     None),
    ("minitrans/ops/activations.py",
     "the sigmoid of the llama config's (16, 128, 688) gate: where between its two sides, "
     "or one expression", GATE, "np.where(a >= 0, s, e * s)",
     "np.exp(np.minimum(a, 0.0)) / (1.0 + e)", None),
]
