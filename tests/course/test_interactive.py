"""Interactive figures (minitrans_course.interactive and interactive_figures):
self-contained HTML that asks no other host for anything, data that is what
minitrans computes, unique ids, a static PNG, and, in headless Chromium when
it is here, a drawing that changes when each control is moved."""

import html.parser
import json
import re

import numpy as np
import pytest

from minitrans.decoding.sampling import top_k_filter, top_p_filter
from minitrans.layers.positional import sinusoidal_table
from minitrans.ops.softmax import softmax
from minitrans_course import interactive_figures as figures
from minitrans_course.interactive import SliderFigure
from minitrans.training.optimisation.schedule import transformer_lr

LOGITS = [2.0, 1.0, 0.5, 0.0, -1.0]


def every_figure():
    return [
        figures.softmax_temperature_figure(LOGITS),
        figures.scaled_scores_figure(sizes=(1, 16, 256), queries=20),
        figures.positional_offsets_figure(d_models=(16, 64), offsets=20),
        figures.learning_rate_figure(warmups=(100, 400), d_models=(64, 512), steps=2000, points=20),
        figures.sampling_filters_figure(LOGITS, list("abcde"), ps=(0.5, 0.9, 1.0)),
    ]


class Tags(html.parser.HTMLParser):
    """Every start tag with its attributes, and the JSON in script tags."""

    def __init__(self):
        super().__init__()
        self.tags, self.data, self._json = [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._json = tag == "script" and dict(attrs).get("type") == "application/json"

    def handle_data(self, data):
        if self._json:
            self.data.append(json.loads(data))
            self._json = False


def parse(markup):
    tags = Tags()
    tags.feed(markup)
    return tags


def close(embedded, computed, rel=1e-4):
    """The embedded numbers (5 significant digits) equal the computed ones."""
    computed = np.asarray(computed, dtype=float)
    return np.allclose(np.asarray(embedded, dtype=float), computed, rtol=rel, atol=1e-12)


@pytest.mark.parametrize("figure", every_figure(), ids=lambda f: f.spec["title"][:20])
def test_the_html_is_self_contained(figure):
    markup = figure.to_html()
    assert "http" not in markup, "no URL to any host"
    tags = parse(markup)
    assert not [t for t, attrs in tags.tags if "src" in attrs or "href" in attrs]
    assert tags.tags[0][0] == "div" and "data-interactive" in tags.tags[0][1]
    assert any(t in ("input", "select") for t, _ in tags.tags)
    assert len(tags.data) == 1 and tags.data[0] == json.loads(json.dumps(figure.spec))


def test_a_notebook_shows_the_html():
    figure = figures.softmax_temperature_figure(LOGITS)
    assert figure._repr_html_() == figure.to_html()


def test_ids_are_unique_across_figures():
    first, second = figures.softmax_temperature_figure(LOGITS), figures.softmax_temperature_figure(
        LOGITS
    )
    ids = re.findall(r'id="([^"]+)"', first.to_html() + second.to_html())
    assert len(ids) == 2 and ids[0] != ids[1]


def test_softmax_temperature_data_is_softmax_of_logits_over_t():
    figure = figures.softmax_temperature_figure(LOGITS, temperatures=(0.5, 1.0, 4.0))
    (embedded,) = parse(figure.to_html()).data
    for t, frame in zip((0.5, 1.0, 4.0), embedded["frames"]):
        assert close(frame["series"][0], softmax(np.array(LOGITS) / t))
    assert embedded["start"] == [1], "the slider starts at T = 1"


def test_scaled_scores_data_sums_to_one_and_is_sorted():
    figure = figures.scaled_scores_figure(sizes=(1, 1024), keys=6, queries=50)
    for frame in figure.spec["frames"]:
        for series in frame["series"]:
            assert close(sum(series), 1.0, rel=1e-4) and series == sorted(series, reverse=True)
    raw, scaled = figure.spec["frames"][-1]["series"]
    assert raw[0] > 0.9 > 0.5 > scaled[0], "at d_k 1024 only the unscaled softmax is one-hot"


def test_positional_data_is_the_table_dot_products():
    figure = figures.positional_offsets_figure(d_models=(8, 32), offsets=10, pos=3)
    for d_model, frame in zip((8, 32), figure.spec["frames"]):
        table = np.asarray(sinusoidal_table(14, d_model), dtype=float)
        assert close(frame["series"][0], table[3:] @ table[3] / (d_model / 2), rel=1e-4)


def test_learning_rate_data_is_transformer_lr_for_each_pair():
    figure = figures.learning_rate_figure(warmups=(10, 40), d_models=(16, 64), steps=100, points=11)
    steps = figure.spec["x"]
    assert steps[0] == 1 and steps[-1] == 100
    for n, (warmup, d_model) in enumerate([(10, 16), (10, 64), (40, 16), (40, 64)]):
        expected = [transformer_lr(s, d_model, warmup) for s in steps]
        assert close(figure.spec["frames"][n]["series"][0], expected)
        assert figure.frame_index([n // 2, n % 2]) == n


def test_sampling_data_is_top_k_then_top_p():
    figure = figures.sampling_filters_figure(LOGITS, list("abcde"), ks=[2, 5], ps=(0.6, 1.0))
    z = np.array([LOGITS])
    for n, (k, p) in enumerate([(2, 0.6), (2, 1.0), (5, 0.6), (5, 1.0)]):
        full, kept = figure.spec["frames"][n]["series"]
        assert close(full, softmax(z)[0])
        assert close(kept, top_p_filter(softmax(top_k_filter(z, k)), p)[0])


def test_the_static_png_is_written(tmp_path):
    figure = figures.learning_rate_figure(
        warmups=(10, 20, 40), d_models=(16,), steps=100, points=11
    )
    figure.save_png(tmp_path / "lr.png")
    assert (tmp_path / "lr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(figure.static().axes) == 3, "first, middle and last warmup side by side"


def test_bad_grids_are_refused_with_their_names():
    with pytest.raises(ValueError, match="frames: expected 2"):
        SliderFigure("t", [("T", [1, 2])], [{"series": [[1.0]]}])
    with pytest.raises(ValueError, match="kind"):
        SliderFigure("t", [("T", [1])], [{"series": [[1.0]]}], kind="pie")
    with pytest.raises(ValueError, match="start of T"):
        SliderFigure("t", [("T", [1])], [{"series": [[1.0]]}], start=[3])


def test_a_script_end_tag_in_a_label_cannot_end_the_script():
    figure = SliderFigure("t", [("T", [1])], [{"series": [[1.0]]}], x=["</script>"])
    markup = figure.to_html()
    assert markup.count("</script>") == 2, "only the two real script tags end"
    assert parse(markup).data[0]["x"] == ["</script>"]


def _browser_missing():
    """Why headless Chromium cannot run here (as tests/course/test_site.py judges it), or None."""
    import importlib.util

    from tests.course import test_site

    if importlib.util.find_spec("selenium") is None:
        return f"Selenium is not installed ({test_site.INSTALL_BROWSER})"
    for program in (test_site.CHROMIUM, test_site.CHROMEDRIVER):
        if not program.exists():
            return f"{program} is missing ({test_site.INSTALL_BROWSER})"
    return None


def _chromium():
    """A headless Chromium driver that keeps its console and network logs."""
    from tests.course import test_site
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(test_site.CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(str(test_site.CHROMEDRIVER)))


@pytest.mark.skipif(_browser_missing() is not None, reason=str(_browser_missing()))
def test_every_control_changes_the_drawing_in_chromium(tmp_path):
    """Two figures on one page (slider and menu) respond to their controls,
    log no error, and ask no other host for anything."""
    from tests.course import test_site

    menu = SliderFigure(
        "menu",
        [("row", ["a", "b"])],
        [
            {"matrix": [[1.0, 0.0]], "rows": ["x"], "cols": ["p", "q"]},
            {"matrix": [[0.0, 1.0]], "rows": ["x"], "cols": ["p", "q"]},
        ],
        kind="heatmap",
        menu=True,
    )
    page = "".join(f.to_html() for f in [figures.softmax_temperature_figure(LOGITS), menu])
    (tmp_path / "icon.svg").write_text(test_site.PICTURE)
    (tmp_path / "page.html").write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Figures</title>"
        f"<link rel='icon' href='icon.svg'></head><body>{page}</body></html>"
    )
    server = test_site.serve(tmp_path)
    try:
        browser = _chromium()
        try:
            assert test_site.page_problems(browser, test_site.base_url(server) + "page.html") == []
            assert len(browser.find_elements("css selector", "[data-interactive] svg rect")) > 5
        finally:
            browser.quit()
    finally:
        server.shutdown()


def test_attention_data_is_every_layer_and_head_of_decode_and_attend(tmp_path):
    """One frame per (sentence, layer, head), each the panel's (T_q, T_k) map."""
    import minitrans
    from minitrans.training import attention_maps, experiment
    from minitrans.training.trainer import TrainConfig

    config = TrainConfig(
        task="copy",
        steps=1,
        batch_size=8,
        warmup=1,
        eval_every=1,
        eval_pairs=4,
        out_dir=str(tmp_path),
    )
    sizes = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.0}
    with minitrans.using("numpy", dtype="float32"):
        trainer = experiment.new_trainer(config, sizes, progress=False, log=lambda m: None)
        model, task = trainer.model, trainer.task
        figure = figures.attention_figure(model, task, ["0123", "987"])
        panels = [
            attention_maps.decode_and_attend(model, task, t)[0]["cross"] for t in ("0123", "987")
        ]
    assert [c["values"] for c in figure.spec["controls"]] == [["0123", "987"], [1], [1, 2]]
    for n, frame in enumerate(figure.spec["frames"]):
        panel = panels[n // 2]
        assert frame["cols"] == panel.keys and frame["rows"] == panel.queries
        assert np.allclose(frame["matrix"], panel.weights[0, n % 2], atol=1e-3)
    assert "<select" in figure.to_html() and 'type="range"' not in figure.to_html()
    with pytest.raises(ValueError, match="kind: expected one of"):
        figures.attention_figure(model, task, ["0"], kind="sideways")
