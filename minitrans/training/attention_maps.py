"""What a trained model attends to: decode a text greedily, rerun the result
teacher-forced, and collect the attention weights of every layer and head,
with the tokens that label their rows and columns.

Each map is a ``Panel``: weights (N, h, T_q, T_k), one (T_q, T_k) matrix per
layer and head, whose row i is a softmax over the keys, so it sums to 1.

    encoder-decoder   "encoder"  source over source
                      "decoder"  output over the decoder's inputs (causal)
                      "cross"    output over source
    decoder-only      "decoder"  prompt + output over the inputs (causal)

Rows (queries) are labelled by the token produced at that position, columns
(keys) by the token read there: the decoder reads <bos> + output[:-1] and
produces output, so row t of "decoder" and "cross" is what the model looked
at while it produced output token t.
"""

import dataclasses

from minitrans import decoding
from minitrans.core import backend
from minitrans.data import BOS_ID, EOS_ID, pad
from minitrans.training.optimisation.evaluation import evaluating

PANELS = {"seq2seq": ("encoder", "decoder", "cross"), "lm": ("decoder",)}


@dataclasses.dataclass
class Panel:
    """Attention of one kind, every layer and head.

    weights: (N, h, T_q, T_k) host array
    queries: T_q tokens labelling the rows (what each position produced)
    keys:    T_k tokens labelling the columns (what each position read)
    """

    weights: object
    queries: list
    keys: list


def decode_and_attend(model, task, text):
    """Greedy-decode ``text`` and return its attention by kind, a dict of
    Panels (names in PANELS[task.kind]), and the output tokens, <eos>
    included when the model produced it.

    For a decoder-only model ``text`` is the prompt: <bos> + prompt is fed,
    and the output is its continuation.
    """
    text_tokens = task.tokenizer.split(text)
    ids = task.vocab.encode(text_tokens)
    check_fits(model, task, ids)
    bos = task.vocab.tokens[BOS_ID]
    with evaluating(model):
        if task.kind == "lm":
            prompt = backend.to_device(pad([[BOS_ID] + ids]))  # (1, 1 + T_prompt)
            room = model.config.max_len - len(ids)  # >= 1 (check_fits): positions left
            tokens, maps = decoding.generate_with_attention(model, prompt, room)
        else:
            src = backend.to_device(pad([ids]))  # a batch of one: (1, T_src)
            max_len = min(2 * len(ids) + 10, model.config.max_len - 1)
            tokens, maps = decoding.decode_with_attention(model, src, max_len)
    row = backend.to_numpy(tokens)[0].tolist()
    length = row.index(EOS_ID) + 1 if EOS_ID in row else len(row)  # keep <eos>, drop padding
    output = [task.vocab.tokens[i] for i in row[:length]]

    panels = {}
    if task.kind == "lm":
        reads = [bos] + text_tokens + output[:-1]
        panels["decoder"] = Panel(
            _stack(model, maps, "self_attn", len(reads)), text_tokens + output, reads
        )
    else:
        reads = [bos] + output[:-1]
        panels["encoder"] = Panel(
            _stack(model, maps, "encoder", len(text_tokens)), text_tokens, text_tokens
        )
        panels["decoder"] = Panel(_stack(model, maps, "self_attn", len(output)), output, reads)
        panels["cross"] = Panel(_stack(model, maps, "cross_attn", len(output)), output, text_tokens)
    return panels, output


def check_fits(model, task, ids):
    """The ids of a text must fit the model's positions: a prompt after
    <bos>, a source whole (and a source must have a token)."""
    fed = len(ids) + 1 if task.kind == "lm" else len(ids)
    positions = model.config.max_len
    if fed > positions:
        most, why = (positions - 1, ", one for <bos>") if task.kind == "lm" else (positions, "")
        raise ValueError(
            f"text: expected at most {most} tokens (the model has {positions} "
            f"positions{why}), got {len(ids)} tokens"
        )
    if not fed:
        raise ValueError("text: expected a sentence to translate, got an empty one")


def _stack(model, maps, kind, rows):
    """Every layer's map of ``kind`` ("encoder" self-attention, the
    decoder's "self_attn" or "cross_attn") for the first sentence, its first
    ``rows`` queries (nothing after <eos>): (N, h, rows, T_k)."""
    xp = backend.get_xp()
    if kind == "encoder":
        names = [f"encoder.layers.{i}.self_attn.attention" for i in range(model.config.N)]
    else:
        names = [f"decoder.layers.{i}.{kind}.attention" for i in range(model.config.N)]
    weights = xp.stack([maps[name][0, :, :rows] for name in names])  # (N, h, rows, T_k)
    if kind != "cross_attn":  # self-attention: as many keys as queries
        weights = weights[..., :rows]
    return backend.to_numpy(weights)


def attention_for(model, task, text, layer=-1):
    """Decode ``text`` greedily and return what a heat map of one layer needs:
    (key tokens, query tokens, weights as a host array (h, T_q, T_k)).

    Encoder-decoder: the cross-attention of decoder layer ``layer``; keys are
    the source tokens, queries the output tokens with <eos>. Decoder-only
    (``text`` is the prompt): the self-attention of layer ``layer``; keys are
    <bos> + prompt + output[:-1], the tokens read, queries prompt + output,
    the tokens produced. ``decode_and_attend`` has every layer and kind.
    """
    panels, _ = decode_and_attend(model, task, text)
    panel = panels["decoder" if task.kind == "lm" else "cross"]
    index = range(model.config.N)[layer]
    return panel.keys, panel.queries, panel.weights[index]
