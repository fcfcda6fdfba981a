"""Held-out metrics and the attention of a decoded sentence."""

import numpy as np
import pytest

from minitrans.data.tasks import load_task
from minitrans.training import evaluation, experiment


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
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
    assert int((np.asarray(targets) != 0).sum()) == answers
    metrics = evaluation.teacher_forced_metrics(trainer.model, trainer.task, pairs)
    assert 0.0 <= metrics["token_accuracy"] <= 1.0 and np.isfinite(metrics["loss"])


def test_attention_for_a_decoded_sentence(tiny):
    trainer = tiny["copy"]
    source = trainer.task.valid[0][0]
    source_tokens, output_tokens, weights = evaluation.attention_for(
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
