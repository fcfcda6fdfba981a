"""Figure 1 drawn from a ModelConfig (minitrans_course/diagrams.py) and its two
close-ups, the head split and a token's path (minitrans_course/diagram_flows.py), all
drawn with the shapes of minitrans_course/diagram_shapes.py."""

import io

import pytest

pytest.importorskip("matplotlib")

from minitrans import ModelConfig  # noqa: E402
from minitrans_course.diagram_flows import draw_head_split, draw_token_path  # noqa: E402
from minitrans_course.diagram_shapes import STRONG  # noqa: E402
from minitrans_course.diagrams import PARTS, draw_architecture  # noqa: E402

SMALL = ModelConfig(vocab_size=40, d_model=16, h=2, N=1, d_ff=32)
OTHER = ModelConfig(vocab_size=50, d_model=24, h=3, N=4, d_ff=48)


def _png(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=30)
    return buffer.getvalue()


def _texts(figure):
    return " ".join(text.get_text() for axes in figure.axes for text in axes.texts)


def _part_colours(figure):
    """{part: set of facecolours} of the boxes, found by their gid."""
    colours = {}
    for patch in figure.axes[0].patches:
        if patch.get_gid() in PARTS:
            colours.setdefault(patch.get_gid(), set()).add(tuple(patch.get_facecolor()))
    return colours


@pytest.mark.parametrize("draw", [draw_architecture, draw_head_split, draw_token_path])
def test_every_drawing_is_a_figure_that_renders_to_png(draw):
    from matplotlib.figure import Figure

    figure = draw(SMALL)
    assert isinstance(figure, Figure)
    assert _png(figure).startswith(b"\x89PNG")


def test_the_architecture_is_labelled_with_the_configs_sizes():
    small, other = _texts(draw_architecture(SMALL)), _texts(draw_architecture(OTHER))
    for text, config in ((small, SMALL), (other, OTHER)):
        assert f"d_model={config.d_model}, h={config.h}, N={config.N}, d_ff={config.d_ff}" in text
        assert f"N={config.N} x" in text  # the stacks' repeat count
        assert f"{config.h} heads of d_k={config.d_model // config.h}" in text
        assert f"d_ff={config.d_ff}" in text and f"V={config.vocab_size}" in text
    assert small != other


def test_the_architecture_draws_every_part_and_the_masks():
    figure = draw_architecture(SMALL)
    assert set(_part_colours(figure)) == set(PARTS)
    text = _texts(figure)
    assert "causal + padding\nmask" in text and "source padding\nmask" in text
    assert "memory (B, S, 16)" in text


@pytest.mark.parametrize("part", PARTS)
def test_highlight_marks_exactly_the_named_part(part):
    colours = _part_colours(draw_architecture(SMALL, highlight=part))
    assert len(colours[part]) == 1, "every box of the part in one colour"
    strong = next(iter(colours[part]))
    others = set().union(*(c for name, c in colours.items() if name != part))
    assert strong not in others and len(others) == 1, "the rest greyed, all alike"
    from matplotlib.colors import to_rgba

    assert strong == to_rgba(STRONG)


def test_without_highlight_the_parts_keep_their_own_colours():
    colours = _part_colours(draw_architecture(SMALL))
    assert len(set().union(*colours.values())) > 3


def test_an_unknown_part_is_refused_by_name():
    with pytest.raises(ValueError, match="highlight: expected one of .*got 'decoder_stack'"):
        draw_architecture(SMALL, highlight="decoder_stack")


def test_a_decoder_only_model_has_no_encoder_and_no_cross_attention():
    lm = ModelConfig(vocab_size=40, d_model=16, h=2, N=1, d_ff=32, decoder_only=True)
    figure = draw_architecture(lm)
    parts = set(_part_colours(figure))
    assert parts == set(PARTS) - {"self_attn", "cross_attn"}
    text = _texts(figure)
    assert "memory" not in text and "source ids" not in text and "Input Embedding" not in text
    assert "decoder-only" in text
    for part in ("cross_attn", "self_attn"):  # parts it does not have cannot be highlighted
        with pytest.raises(ValueError, match=f"got '{part}'"):
            draw_architecture(lm, highlight=part)


def test_pre_norm_changes_the_drawing():
    post = draw_architecture(SMALL)
    pre = draw_architecture(ModelConfig(**{**SMALL.to_dict(), "pre_norm": True}))
    post_text, pre_text = _texts(post), _texts(pre)
    assert "Add & Norm" in post_text and "Layer Norm" not in post_text
    assert "Add & Norm" not in pre_text and "Layer Norm (final)" in pre_text
    assert "pre-norm" in pre_text and "post-norm" in post_text
    assert len(pre.axes[0].patches) > len(post.axes[0].patches)  # a LayerNorm box per sub-layer


def test_the_architecture_draws_into_given_axes():
    from matplotlib.figure import Figure

    figure = Figure()
    axes = figure.subplots(1, 2)
    assert draw_architecture(SMALL, ax=axes[1]) is figure
    assert axes[1].patches and not axes[0].patches


def test_the_head_split_shows_the_sizes_of_every_step():
    text = _texts(draw_head_split(OTHER))
    assert "(B, T, d_model=24)" in text and "h=3" in text and "d_k=8" in text
    assert text.count("head ") >= 3 and "(B, T, h d_k = 24)" in text and "W_O\n(24, 24)" in text
    many = _texts(draw_head_split(ModelConfig(vocab_size=40, d_model=32, h=16, N=1, d_ff=32)))
    assert "... and 8 more heads (16 in all)" in many


def test_the_token_path_follows_the_norm_order_with_its_sizes():
    post = _texts(draw_token_path(OTHER))
    assert "hidden\n(48)" in post and "output\n(24)" in post and "+ x, LayerNorm" in post
    pre = _texts(draw_token_path(ModelConfig(**{**OTHER.to_dict(), "pre_norm": True})))
    assert "+ x (residual)" in pre and "+ x, LayerNorm" not in pre and "pre-norm" in pre


def test_several_parts_may_be_highlighted_together():
    colours = _part_colours(draw_architecture(SMALL, highlight=["feed_forward", "output"]))
    assert colours["feed_forward"] == colours["output"]
    assert all(
        colours[part] != colours["output"]
        for part in PARTS
        if part not in ("feed_forward", "output")
    )
    with pytest.raises(ValueError, match="got 'ffn'"):
        draw_architecture(SMALL, highlight=["feed_forward", "ffn"])
