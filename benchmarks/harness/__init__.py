"""The suite's shared helpers, imported by the scripts of benchmarks/ (which
run with that folder first on sys.path: ``from harness import results``).

    configs           the model sizes the speed benchmarks time, the turns of a run
    machine           the machine a run measured: CPU, BLAS, threads, PyTorch
    results           the results file every run writes, its header and name
    latest            the README's latest tables, kept equal to the newest files
    allocators        the malloc a benchmark worker runs with
    workload          what both libraries' workers are given: batches, Adam, sources
    worker            a worker process of vs_pytorch.py, answering its parent
    minitrans_runner  minitrans's training step, products, decoding and memory
    torch_runner      the same model in PyTorch, eager or compiled
    llama_runner      the llama config: DecoderOnlyLM against transformers' Llama
    matmul_timer      the matrix products of a step, counted and timed alone
    report            vs_pytorch.py's Markdown report
    own_corpora       the generated corpora of own_data.py
"""
