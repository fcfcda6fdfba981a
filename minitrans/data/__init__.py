"""From text to batches of token ids: vocabulary, tokenisers, padding, TSV files.

    text --Tokenizer.split--> tokens --Vocab.encode--> ids --make_*_batch--> Batch

Sub-word tokens (byte-pair encoding, learned from a corpus) are in
``minitrans.data.bpe``; ``Tokenizer("bpe", bpe=...)`` uses them.

The built-in toy tasks are in ``minitrans.data.tasks`` and the grammar of the toy
translation in ``minitrans.data.toy_language``.
"""

from minitrans.data.batches import (  # noqa: F401
    Batch,
    iterate_batches,
    make_lm_batch,
    make_seq2seq_batch,
    pad,
)
from minitrans.data.bpe import BPE, learn_merges  # noqa: F401
from minitrans.data.tokenizer import Tokenizer, learn_subwords  # noqa: F401
from minitrans.files.tsv import read_tsv, write_tsv  # noqa: F401
from minitrans.data.vocab import (  # noqa: F401
    BOS,
    BOS_ID,
    EOS,
    EOS_ID,
    PAD,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK,
    UNK_ID,
    DataError,
    Vocab,
)
