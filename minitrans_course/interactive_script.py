"""The browser side of ``minitrans_course.interactive.SliderFigure``: one
JavaScript function, inlined into each figure's HTML and called with the
figure's element id. It reads the figure's embedded JSON, finds the frame
that the controls' values select (C order over the controls, as in
``SliderFigure.frame_index``) and writes it as SVG markup: bars, lines or a
heat map. Plain JavaScript: no library, no request to any other host.
"""

# The drawing, in the browser: pick the frame of the controls' values and
# write it as SVG markup. Called with the figure's element id.
SCRIPT = r"""function (id) {
  const root = document.getElementById(id);
  const spec = JSON.parse(root.querySelector('script[type="application/json"]').textContent);
  const controls = Array.from(root.querySelectorAll('[data-control]'));
  const colours = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728'];
  const W = 600, H = 280, L = 56, R = 10, T = 10, B = 46;
  const esc = s => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const text = (x, y, s, extra) =>
    `<text x="${x}" y="${y}" font-size="11" ${extra || ''}>${esc(s)}</text>`;
  function bars(frame) {
    const [lo, hi] = spec.ylim, n = spec.x.length, S = frame.series.length;
    const y = v => T + (H - T - B) * (hi - v) / (hi - lo || 1), step = (W - L - R) / n;
    let out = '';
    frame.series.forEach((values, s) => values.forEach((v, i) => {
      const x = L + i * step + step * 0.1 + s * step * 0.8 / S, top = Math.min(y(v), y(0));
      out += `<rect x="${x}" y="${top}" width="${step * 0.8 / S}" ` +
        `height="${Math.abs(y(v) - y(0))}" fill="${colours[s % 4]}"/>`;
    }));
    spec.x.forEach((label, i) => { out += text(L + (i + 0.5) * step, H - B + 14, label,
      'text-anchor="middle"'); });
    return out + axes(lo, hi, y);
  }
  function lines(frame) {
    const [lo, hi] = spec.ylim, xs = spec.x, x0 = xs[0], x1 = xs[xs.length - 1];
    const y = v => T + (H - T - B) * (hi - v) / (hi - lo || 1);
    const x = v => L + (W - L - R) * (v - x0) / (x1 - x0 || 1);
    let out = '';
    frame.series.forEach((values, s) => {
      const points = values.map((v, i) => `${x(xs[i]).toFixed(1)},${y(v).toFixed(1)}`);
      out += `<polyline fill="none" stroke="${colours[s % 4]}" stroke-width="2" ` +
        `points="${points.join(' ')}"/>`;
    });
    out += text(L, H - B + 14, x0) + text(W - R, H - B + 14, x1, 'text-anchor="end"');
    return out + axes(lo, hi, y);
  }
  function axes(lo, hi, y) {
    let out = `<line x1="${L}" y1="${y(lo)}" x2="${W - R}" y2="${y(lo)}" stroke="#333"/>` +
      `<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#333"/>`;
    for (const v of [lo, (lo + hi) / 2, hi]) out += text(L - 4, y(v) + 4, +v.toPrecision(3),
      'text-anchor="end"');
    out += text((L + W) / 2, H - 8, spec.xlabel, 'text-anchor="middle"');
    out += text(12, (T + H - B) / 2, spec.ylabel,
      `text-anchor="middle" transform="rotate(-90 12 ${(T + H - B) / 2})"`);
    spec.names.forEach((name, s) => { out += `<rect x="${W - 170}" y="${T + 4 + 14 * s}" ` +
      `width="10" height="10" fill="${colours[s % 4]}"/>` +
      text(W - 155, T + 13 + 14 * s, name); });
    return out;
  }
  function heatmap(frame) {
    const rows = frame.rows.length, cols = frame.cols.length;
    const cw = (W - 90 - R) / cols, ch = (H - T - 60) / rows;
    let out = '';
    frame.matrix.forEach((row, r) => row.forEach((v, c) => {
      const shade = Math.round(255 * (1 - Math.max(0, Math.min(1, v))));
      out += `<rect x="${90 + c * cw}" y="${T + r * ch}" width="${cw}" height="${ch}" ` +
        `fill="rgb(${shade},${shade},255)"><title>${v}</title></rect>`;
    }));
    frame.rows.forEach((s, r) => { out += text(86, T + (r + 0.6) * ch, s, 'text-anchor="end"'); });
    frame.cols.forEach((s, c) => { const x = 90 + (c + 0.5) * cw, y = T + rows * ch + 6;
      out += text(x, y, s, `text-anchor="end" transform="rotate(-60 ${x} ${y})"`); });
    return out;
  }
  function draw() {
    let index = 0;
    controls.forEach((control, n) => {
      index = index * spec.controls[n].values.length + Number(control.value);
      const shown = control.parentElement.querySelector('output');
      if (shown) shown.textContent = spec.controls[n].values[Number(control.value)];
    });
    const frame = spec.frames[index];
    const body = {bars, lines, heatmap}[spec.kind](frame);
    root.querySelector('.minitrans-plot').innerHTML =
      `<svg width="100%" viewBox="0 0 ${W} ${H}" role="img">${body}</svg>`;
    root.querySelector('.minitrans-note').textContent = frame.note || '';
  }
  controls.forEach(control => { control.addEventListener('input', draw);
    control.addEventListener('change', draw); });
  draw();
}"""
