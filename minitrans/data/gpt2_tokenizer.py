"""GPT-2's tokenizer, read from a folder's ``vocab.json`` and ``merges.txt``.

``vocab.json`` maps each token (written in the byte table's characters, see
``minitrans.data.byte_level_bpe``) to its id; ``merges.txt`` lists one merge
a line, the two tokens separated by one space, in rank order, after an
optional "#version" line:

    #version: 0.2
    Ġ t
    Ġ a
    h e

The pipeline is GPT-2's: the text is cut by ``GPT2_PATTERN``, each piece is
byte-mapped and merged, and nothing else is added: no prefix space, no
begin-of-text token, and "<|endoftext|>" in the text is read as characters
(GPT-2's own encoder does the same; a model folder that wants it matched as
one token ships a tokenizer.json with it in ``added_tokens``).

    >>> tokenizer = GPT2Tokenizer.from_files("gpt2/vocab.json", "gpt2/merges.txt")
    >>> tokenizer.encode("Hello world")  # doctest: +SKIP
    [15496, 995]
"""

from minitrans.data import byte_level_bpe
from minitrans.files.rules import short
from minitrans.files.tokenizer_files import (
    JsonFile,
    SourceFile,
    TokenizerFileError,
    check_ids_without_gaps,
    check_vocab,
    read_text,
)


class GPT2Tokenizer:
    """Byte-level BPE with GPT-2's pattern: ``encode(text) -> ids`` and
    ``decode(ids) -> text``.

    Inputs:
    - vocab: token -> id
    - merge_ranks: (left id, right id) -> (rank, merged id), as
      ``byte_level_bpe.merge_table`` builds it
    """

    def __init__(self, vocab, merge_ranks):
        self.model = byte_level_bpe.BPEModel(vocab, merge_ranks)
        self.tokens = {token_id: token for token, token_id in vocab.items()}
        self._pattern = byte_level_bpe.compile_pattern(byte_level_bpe.GPT2_PATTERN)

    @classmethod
    def from_files(cls, vocab_path, merges_path):
        source = JsonFile(vocab_path)
        vocab = check_vocab(source, "", source.data)
        check_ids_without_gaps(source, "(top)", {token_id: token
                                                 for token, token_id in vocab.items()})
        merges = read_merges_txt(merges_path)
        # A merge names tokens of vocab.json: its errors name merges.txt's line.
        return cls(vocab, byte_level_bpe.merge_table(SourceFile(merges_path),
                                                     source.name, vocab, merges))

    def __len__(self):
        return len(self.tokens)

    def encode(self, text):
        """The token ids of ``text`` (a str)."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected a str, got {type(text).__name__}")
        ids = []
        for piece in self._pattern.findall(text):
            ids += self.model.tokenize(byte_level_bpe.to_byte_level(piece))
        return ids

    def decode(self, ids):
        """The text of ``ids``; bytes that are not whole UTF-8 characters
        show as U+FFFD. An id outside the vocabulary is an error."""
        tokens = byte_level_bpe.lookup_tokens(self.tokens, ids)
        return byte_level_bpe.from_byte_level(tokens)


def read_merges_txt(path):
    """merges.txt -> a list of (label, left, right), label naming the line.

    Lines are cut at "\\n" alone (a trailing "\\r" is dropped): a token may
    hold other line-breaking characters of Unicode, which str.splitlines
    would cut at. A "#version" line is skipped, as the library skips it."""
    text = read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    merges = []
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        if line.startswith("#version"):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise TokenizerFileError(f"{path}: line {number}: expected two tokens separated "
                                     f"by one space, got {short(line)}")
        merges.append((f"line {number}", parts[0], parts[1]))
    return merges
