"""Held-out metrics and the attention of a decoded sentence."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.data import UNK_ID
from minitrans.data.tasks import load_task
from minitrans.training import attention_maps, experiment
from minitrans.training.optimisation import evaluation


@pytest.fixture(autouse=True)
def on_every_backend(backend_name):
    """Every test here runs on each backend (conftest's ``backend_name``):
    NumPy, the strict backend, which takes CuPy's paths (one worker, arrays
    that refuse to mix with the host's), and CuPy where a GPU is present."""


@pytest.fixture
def tiny(tmp_path_factory, backend_name):
    """Untrained tiny models of the copy and addition tasks."""
    def build(task_name):
        config = experiment.train_config_for(
            task_name, steps=1, out_dir=str(tmp_path_factory.mktemp(task_name))
        )
        sizes = {"d_model": 16, "h": 2, "N": 2, "d_ff": 32}
        return experiment.new_trainer(config, sizes, progress=False, log=lambda m: None)
    return {"copy": build("copy"), "lm": build("lm")}


def test_exact_match_counts_only_identical_outputs(tiny, monkeypatch):
    trainer = tiny["copy"]
    pairs = trainer.task.valid[:4]
    monkeypatch.setattr(evaluation, "predict", lambda model, task, sources, max_len, beam_size=1:
                        [task.vocab.encode(task.tokenizer.split(s)) for s in sources[:3]] + [[]])
    accuracy, texts = evaluation.exact_match(trainer.model, trainer.task, pairs)
    assert accuracy == 0.75 and texts[:3] == [src for src, _ in pairs[:3]] and texts[3] == ""


def test_beam_search_and_greedy_both_run(tiny):
    trainer = tiny["copy"]
    pairs = trainer.task.valid[:3]
    greedy, _ = evaluation.exact_match(trainer.model, trainer.task, pairs)
    beam, texts = evaluation.exact_match(trainer.model, trainer.task, pairs, beam_size=3)
    assert 0.0 <= greedy <= 1.0 and 0.0 <= beam <= 1.0 and len(texts) == 3


def test_language_model_metrics_score_the_answer_only(tiny):
    trainer = tiny["lm"]
    pairs = trainer.task.valid[:8]
    batch = trainer.task.make_batch(pairs)
    targets = evaluation.answer_targets(trainer.task, pairs, batch.tgt_out, 0)
    answers = sum(len(tgt) + 1 for _, tgt in pairs)  # the digits of the sum and <eos>
    assert int((minitrans.to_numpy(targets) != 0).sum()) == answers
    metrics = evaluation.teacher_forced_metrics(trainer.model, trainer.task, pairs)
    assert 0.0 <= metrics["token_accuracy"] <= 1.0 and np.isfinite(metrics["loss"])


def test_attention_for_a_decoded_sentence(tiny):
    trainer = tiny["copy"]
    source = trainer.task.valid[0][0]
    source_tokens, output_tokens, weights = attention_maps.attention_for(
        trainer.model, trainer.task, source
    )
    assert source_tokens == list(source)
    assert weights.shape == (2, len(output_tokens), len(source_tokens))
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)


def test_fit_with_no_steps_left_reports_where_it_stands(tiny):
    trainer = tiny["copy"]
    trainer.fit()
    result = trainer.fit()  # already at its last step
    assert result["step"] == 1 and "exact_match" in result


def test_bleu_by_sacrebleu():
    assert evaluation.corpus_bleu(
        ["the cat sat on the mat"], ["the cat sat on the mat"]
    ) == pytest.approx(100.0)
    assert evaluation.corpus_bleu(["a b c d"], ["w x y z"]) < 1.0
    assert load_task("translate").kind == "seq2seq"


# ------------------------------------------------------------ honest metrics


def test_an_unk_prediction_is_never_a_correct_token(tiny, monkeypatch):
    """Targets unknown to the vocabulary and a model that answers <unk> at
    every position: the old code counted 10 of the 11 tokens (all but <eos>)
    correct, a token accuracy of 91% for a model that knows nothing."""
    trainer = tiny["copy"]
    pairs = [("0123456789", "abcdefghij")]  # letters: <unk> in the copy task's vocabulary
    vocab_size = len(trainer.task.vocab)

    def answers_unk(*inputs):
        logits = np.zeros((1, 11, vocab_size), dtype=np.float32)
        logits[..., UNK_ID] = 10.0
        return backend.to_device(logits)

    monkeypatch.setattr(trainer.model, "forward", answers_unk)
    metrics = evaluation.teacher_forced_metrics(trainer.model, trainer.task, pairs)
    assert metrics["token_accuracy"] == 0.0


def test_an_output_holding_unk_never_matches_its_reference(tiny, monkeypatch):
    """A reference whose text is "<unk>" and an output of the <unk> token
    decode to the same text; the old code counted the pair a hit."""
    trainer = tiny["copy"]
    monkeypatch.setattr(evaluation, "predict", lambda model, task, sources, max_len, beam_size=1:
                        [[UNK_ID], task.vocab.encode(list("12"))])
    accuracy, texts = evaluation.exact_match(trainer.model, trainer.task,
                                             [("0", "<unk>"), ("12", "12")])
    assert texts == ["<unk>", "12"] and accuracy == 0.5


def test_bleu_scores_text_without_spaces_by_characters():
    """The old BLEU scored "345201" as one word: one wrong digit gave 0.00."""
    assert evaluation.bleu_tokenizer(["345201", "2021-03-03"]) == "char"
    assert evaluation.bleu_tokenizer(["the cat sat on the mat"]) == "13a"
    assert evaluation.bleu_tokenizer(["a" * 40 + " " + "b" * 40]) == "char"  # 1 space in 81
    hypotheses, references = ["3452019876", "1234567890"], ["3452019877", "1234567890"]
    assert evaluation.corpus_bleu(hypotheses, references, tokenize="13a") == pytest.approx(
        evaluation.corpus_bleu(["x", "1234567890"], references, tokenize="13a"))
    assert 80.0 < evaluation.corpus_bleu(hypotheses, references) < 100.0
