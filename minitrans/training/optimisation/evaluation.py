"""Held-out metrics: loss, token accuracy, exact match and BLEU.

An <unk> in a prediction is never counted as right: the model wrote "I do
not know this word", not the word. Token accuracy counts no <unk>
prediction as correct (even where the reference's token is <unk> too), and
exact match compares the decoded prediction with the reference's text,
never with the reference mapped to <unk>s.
"""

import contextlib

from minitrans import decoding
from minitrans.core import backend
from minitrans.data import BOS_ID, EOS_ID, UNK_ID, pad
from minitrans.layers.loss import LabelSmoothedCrossEntropy


def teacher_forced_metrics(model, task, pairs, batch_size=256, label_smoothing=0.0):
    """Held-out losses and token accuracy, the true prefix fed in (teacher
    forcing), as in training, token-weighted over ``pairs``:

    loss:           cross-entropy without label smoothing over the tokens a
                    task is scored on: every target token, but for a
                    decoder-only task only the answer's (``answer_targets``),
                    as a prompt's tokens are random and cannot be predicted
    token_accuracy: argmax predictions over those same tokens (an <unk>
                    prediction is never correct)
    objective:      what the trainer minimises, on held-out pairs: label
                    smoothing ``label_smoothing`` over every target token (a
                    language model's prompt included), so its curve and the
                    training loss measure the same thing (but dropout, which
                    is off here); ``loss`` differs from it in kind for every
                    task with label smoothing, and in tokens for ``lm``
    """
    loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=model.config.pad_id)
    objective_fn = LabelSmoothedCrossEntropy(label_smoothing, pad_id=model.config.pad_id)
    total_loss = total_objective = correct = count = all_tokens = 0.0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        batch = task.make_batch(chunk)
        with evaluating(model):
            logits = model.forward(*model_inputs(batch))
        every = float((batch.tgt_out != model.config.pad_id).sum())
        total_objective += float(objective_fn.forward(logits, batch.tgt_out)) * every
        all_tokens += every
        targets = answer_targets(task, chunk, batch.tgt_out, model.config.pad_id)
        real = targets != model.config.pad_id
        tokens = float(real.sum())
        total_loss += float(loss_fn.forward(logits, targets)) * tokens
        predicted = logits.argmax(axis=-1)
        correct += float(((predicted == targets) & real & (predicted != UNK_ID)).sum())
        count += tokens
    return {"loss": total_loss / max(count, 1.0), "token_accuracy": correct / max(count, 1.0),
            "objective": total_objective / max(all_tokens, 1.0)}


def predict(model, task, sources, max_len=None, batch_size=250, beam_size=1):
    """Translations (lists of ids, without <bos>/<eos>) of source texts, by
    greedy decoding or, with ``beam_size`` > 1, beam search.

    For a decoder-only task the source is the prompt and the prediction is
    its continuation.
    """
    encoded = [task.vocab.encode(task.tokenizer.split(text)) for text in sources]
    predictions = [None] * len(encoded)
    # same-length groups: a decoder-only prompt must not contain padding
    by_length = {}
    for index, ids in enumerate(encoded):
        key = len(ids) if task.kind == "lm" else 0
        by_length.setdefault(key, []).append(index)
    for indices in by_length.values():
        for start in range(0, len(indices), batch_size):
            chunk = indices[start:start + batch_size]
            with evaluating(model):
                rows = _decode_chunk(model, task, [encoded[i] for i in chunk], max_len, beam_size)
            for index, row in zip(chunk, rows):
                predictions[index] = row
    return predictions


def _decode_chunk(model, task, encoded, max_len, beam_size=1):
    longest = max(len(ids) for ids in encoded)
    room = model.config.max_len - (longest + 1 if task.kind == "lm" else 1)  # positions left
    limit = min(max_len or 2 * longest + 10, room)  # a translation is rarely 2x longer
    if task.kind == "lm":
        prompt = backend.to_device(
            pad([[BOS_ID] + ids for ids in encoded])
        )  # equal lengths: no padding
        generated = decoding.generate(model, prompt, max_new_tokens=limit)
    else:
        src = backend.to_device(pad(encoded))
        if beam_size > 1:
            generated = decoding.beam_search(model, src, beam_size=beam_size, max_len=limit)
        else:
            generated = decoding.greedy(model, src, max_len=limit)
    return [_until_eos(row) for row in backend.to_numpy(generated).tolist()]


def answer_targets(task, pairs, tgt_out, pad_id):
    """The targets that a decoder-only task is scored on: ``tgt_out`` (B, T)
    with the positions that predict prompt tokens set to ``pad_id``, since a
    prompt's tokens are random and cannot be predicted; ``tgt_out`` itself
    for an encoder-decoder task. ``pairs`` are the batch's (prompt, answer)
    texts, row by row."""
    if task.kind != "lm":
        return tgt_out
    host = backend.to_numpy(tgt_out).copy()
    for row, (prompt, _) in enumerate(pairs):
        host[row, :len(task.tokenizer.split(prompt))] = pad_id  # tgt_out[t] predicts token t+1
    return backend.to_device(host)


def exact_match(model, task, pairs, max_len=None, beam_size=1):
    """The fraction of pairs whose output (greedy, or beam search with
    ``beam_size`` > 1) equals the target exactly, and the predicted texts.

    An output holding <unk> is never equal to its target, even to a target
    whose text says "<unk>"."""
    if max_len is None:  # one token more than the longest target: room for <eos>
        max_len = 1 + max(len(task.tokenizer.split(tgt)) for _, tgt in pairs)
    predictions = predict(model, task, [src for src, _ in pairs], max_len, beam_size=beam_size)
    texts = [task.tokenizer.join(task.vocab.decode(ids)) for ids in predictions]
    targets = [reference_text(task, tgt) for _, tgt in pairs]
    hits = sum(UNK_ID not in ids and text == target
               for ids, text, target in zip(predictions, texts, targets))
    return hits / max(len(pairs), 1), texts


def reference_text(task, target):
    """A target as a right output reads: its whitespace made single spaces,
    as the tokenizer's ``join(split(...))`` gives it (unchanged at char level)."""
    return task.tokenizer.join(task.tokenizer.split(target))


# Text with fewer spaces than one per this many characters is scored by
# characters: "2021-03-03" or "345201" is one word to sacrebleu's default
# tokenizer, so one wrong digit would score like a wrong sentence.
CHARACTERS_PER_SPACE = 20


def bleu_tokenizer(references):
    """The sacrebleu tokenizer that suits ``references`` (texts): "char" when
    they hold fewer than one space per CHARACTERS_PER_SPACE characters (no
    spaces to speak of: digits, dates, Chinese), else "13a", sacrebleu's
    default, the WMT standard."""
    characters = sum(len(text) for text in references)
    spaces = sum(text.count(" ") for text in references)
    return "char" if spaces * CHARACTERS_PER_SPACE < characters else "13a"


def corpus_bleu(hypotheses, references, tokenize=None):
    """Corpus BLEU (0 to 100) computed by sacrebleu on detokenised text, with
    sacrebleu's ``tokenize`` (default: ``bleu_tokenizer(references)``)."""
    try:
        import sacrebleu
    except ImportError:
        raise RuntimeError('BLEU needs sacrebleu: pip install "minitrans[train]"') from None
    tokenize = tokenize or bleu_tokenizer(references)
    return float(sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize).score)


@contextlib.contextmanager
def evaluating(model):
    """Evaluation mode (no dropout) inside the block, the old mode after it."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def model_inputs(batch):
    """What the model's forward takes from a batch: (src, tgt_in), or
    (tgt_in,) for a decoder-only model."""
    return (batch.tgt_in,) if batch.src is None else (batch.src, batch.tgt_in)


def _until_eos(row):
    return row[:row.index(EOS_ID)] if EOS_ID in row else row
