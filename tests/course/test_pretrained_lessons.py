"""Lessons 19, 22 and 23 and the course's README checked against minitrans
and the papers: what minitrans has (the GPT-2 and Llama loaders, GPT-2's
tokenizer, the options of ModelConfig), what the loader refuses, the facts
of RMSNorm, rotary positions and grouped-query attention as the papers and
the checkpoints give them, and the benchmark results a lesson cites.

Each test reads the lesson sources' prose, the executed notebooks'
printouts (``tests.course.lesson_text``) or minitrans itself."""

import dataclasses
import importlib
import re

import pytest

import minitrans
from minitrans.pretrained import architectures
from minitrans.files.rules import PretrainedError
from tests.course.lesson_text import LESSONS, ROOT, cells, outputs, prose, table

README = (LESSONS / "README.md").read_text(encoding="utf-8")


def words(prefix):
    """The number of words of a lesson's Markdown text."""
    return len(prose(prefix).split())


# ---- lesson 19 and the README: what minitrans has


def test_minitrans_has_what_lesson_19_uses():
    """The GPT-2 loader, GPT-2's tokenizer and the options GPT-2 needs."""
    assert hasattr(importlib.import_module("minitrans.data.gpt2_tokenizer"), "GPT2Tokenizer")
    assert callable(importlib.import_module("minitrans.pretrained").load_pretrained)
    fields = {field.name for field in dataclasses.fields(minitrans.ModelConfig)}
    assert {"scale_embedding", "output_bias", "pad_id"} <= fields
    assert minitrans.ModelConfig(vocab_size=10, d_model=8, h=2, N=1, d_ff=16, pad_id=None,
                                 decoder_only=True).pad_id is None


def test_lesson_19_does_not_say_minitrans_lacks_them():
    text = prose("19")
    for absent in ("does not pass on yet", "would need a reader", "always × √d_model",
                   "what loading OpenAI's weights would take", "would have to do",
                   "must be zeros"):
        assert absent not in text, absent
    rows = {row[0]: row for row in table(lesson_text("19"), "# | | Transformer (2017)")}
    assert "`scale_embedding=False`" in rows["embedding scale"][3]
    assert "`output_bias=False`" in rows["embedding and output matrix"][3]
    assert "`pad_id=None`" in rows["padding"][3]
    assert "`data.gpt2_tokenizer`" in rows["tokens"][3]
    assert "23_loading_pretrained_weights" in text


def lesson_text(prefix):
    (path,) = LESSONS.glob(f"{prefix}_*.py")
    return path.read_text(encoding="utf-8")


def test_lesson_19_links_gelu_to_the_lesson_that_teaches_it():
    rows = {row[0]: row for row in table(lesson_text("19"), "# | | Transformer (2017)")}
    assert "(17_dropout_initialisation_and_gelu.ipynb)" in rows["feed-forward activation"][4]
    assert "GELU" in prose("17")


def test_lesson_19_counts_gpt2s_residual_layers_two_per_block():
    """GPT-2 scales its residual layers' weights by 1/√N, N the residual layers:
    attention and feed-forward, two per block (24 in GPT-2 small)."""
    rows = {row[0]: row for row in table(lesson_text("19"), "# | | Transformer (2017)")}
    cell = rows["initialisation"][2]
    assert "1/√N" in cell and "number of residual layers" in cell
    assert "two per block" in cell and "24 in GPT-2 small" in cell


def test_lesson_19_builds_gpt2_as_the_loader_does_and_counts_it():
    """Its printed count is the checkpoint's less the key biases, 12 x 768."""
    printed = outputs("19")
    assert "difference -9,216 = - key biases 12 x 768 = -9,216: True" in printed
    summary = prose("19")[prose("19").index("## Summary"):]
    assert "124,430,592" in summary and "124,480,849" not in summary


def test_the_readme_names_the_checkers_module_that_imports():
    assert not re.search(r"(?<![\w.])minitrans\.exercises", README)
    assert "`minitrans_course.exercises`" in README
    importlib.import_module("minitrans_course.exercises")


def test_the_readme_does_not_say_the_loader_is_missing():
    assert "what loading OpenAI's weights would take" not in README
    assert "[Loading pretrained weights](23_loading_pretrained_weights.ipynb)" in README


# ---- lesson 22: the facts of today's decoder


def test_lesson_22_argues_for_rmsnorm_from_experiment_not_absorption():
    text = prose("22")
    assert "can absorb" not in text and "something that map" not in text
    assert "empirical" in text and "no bias at all" in text
    assert "7% to 64% faster" not in text
    assert "running time 7% to 64% lower" in text


def test_lesson_22_gives_the_papers_rmsnorm_without_epsilon():
    section = prose("22")[prose("22").index("## 1. RMSNorm"):prose("22").index("### The backward")]
    first_formula = re.search(r"\$\$(.*?)\$\$", section).group(1)
    assert "RMS" in first_formula and "\\epsilon" not in first_formula
    assert "The paper's RMS has no $\\epsilon$" in section


def test_lesson_22_writes_the_gain_and_the_gradient_as_lesson_11_does():
    """Lesson 11: the gain γ and g = dy ⊙ γ, the gradient at x̂; lesson 22 the same."""
    assert "$g = dy \\odot \\gamma$" in prose("11")
    text = prose("22")
    assert "\\hat g" not in text and "g = dy \\odot\n\\gamma" not in text
    assert "$g = dy \\odot \\gamma$" in text and "y = \\gamma \\odot" in text
    assert "my_rms_norm(x, gamma, eps, dy)" in lesson_text("22")


def test_lesson_22_says_which_checkpoints_load_as_they_are():
    text = prose("22")
    assert "loads Llama's weights as they are" not in text
    assert "Meta's own Llama code" in text and "Hugging Face's format" in text
    assert "permutes" in text


def test_lesson_22_dates_grouped_query_attention_and_the_biases_right():
    text = prose("22")
    assert "Llama 2's 34B and 70B models" in text and "Llama 2's largest model" not in text
    (biases,) = [row for row in table(lesson_text("22"), "# | | GPT-2 (2019)")
                 if row[0] == "biases"]
    assert "but the output projection" in biases[1] and "no bias" in biases[1]


def test_lesson_22_says_why_llama_3_raised_the_rotary_base():
    text = prose("22")
    assert "500,000" in text and "longer contexts" in text
    assert "of 64 pairs turn less than once in 8,192 positions" in outputs("22")
    assert "`rope_scaling`" in text and "Llama 3.1" in text and "Llama 3.2 1B" in text


def test_lesson_22_states_the_scale_in_the_grouped_query_exercise():
    lesson_cells = cells("22")
    (call,) = [n for n, (kind, text) in enumerate(lesson_cells)
               if kind == "code" and "check_grouped_attention_backward(my_" in text]
    assert "\\sqrt{d_k}" in lesson_cells[call - 1][1]


def test_lesson_22_leaves_loading_to_lesson_23_and_stays_under_3400_words():
    """Loading a checkpoint is lesson 23's; lesson 22 keeps to the layers."""
    assert words("22") < 3400
    assert "## 6. Loading" not in prose("22")


# ---- lesson 23: loading, and what the loader refuses


def test_the_loader_refuses_scaled_rotary_positions():
    hub = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1,
           "intermediate_size": 64, "vocab_size": 16, "rope_theta": 500000.0,
           "rope_scaling": {"factor": 32.0, "rope_type": "llama3"}}
    with pytest.raises(PretrainedError, match="rope_scaling"):
        architectures.model_config("config.json", hub, architectures.LLAMA)


def test_lesson_23_shows_the_refusal_and_the_two_rotary_layouts():
    text = prose("23")
    assert "`rope_scaling`" in text and "Llama 3.2 1B" in text and "Llama 3.1" in text
    assert "convert_llama_weights_to_hf.py" in text and "pair neighbours" in text
    printed = outputs("23")
    if "PyTorch or transformers is not installed" in printed:
        pytest.skip("the stored notebook ran without PyTorch")
    assert "PretrainedError: tiny-llama-scaled/config.json: rope_scaling is" in printed
    same = re.search(r"Meta's order and pairing against Hugging Face's: scores differ by "
                     r"([\d.e+-]+)", printed)
    mixed = re.search(r"Meta's weights with Hugging Face's pairing: by ([\d.]+)", printed)
    assert float(same.group(1)) < 1e-10 and float(mixed.group(1)) > 1.0


def test_lesson_23_follows_lesson_22_on_the_main_path():
    main_path = README.split("## Appendix")[0]
    assert main_path.index("22_todays_decoder.ipynb") < main_path.index(
        "23_loading_pretrained_weights.ipynb")


# ---- the benchmark results a lesson cites

SUITE = {"task_targets.py", "ablations.py", "modern_ablation.py", "own_data.py", "vs_pytorch.py",
         "kernels.py", "text_lm.py"}


def test_lessons_cite_results_folders_and_the_suite_only():
    """No lesson points at the benchmarks' README or at an investigation
    script; a results folder cited is one of a script's."""
    for source in sorted(LESSONS.glob("[0-9][0-9]_*.py")):
        text = source.read_text(encoding="utf-8")
        assert "benchmarks/README.md" not in text, source.name
        scripts = set(re.findall(r"benchmarks/(\w+\.py)", text))
        assert scripts <= SUITE, (source.name, scripts - SUITE)
        for folder in re.findall(r"benchmarks/results/(\w+)/", text):
            assert (f"{folder}.py" in SUITE or folder in {
                "step_breakdown", "grouped_query", "ab_steps", "products_by_shape",
                "threads_or_processes", "adam_threads", "decoding_shards", "finetune_step",
                "device_check"}), (source.name, folder)


def test_the_readme_cites_no_benchmark_readme_section():
    assert "benchmarks/README.md" not in README
    assert (ROOT / "benchmarks" / "results" / "modern_ablation.json").exists()
