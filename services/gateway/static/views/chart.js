// @ts-check
// modelevents UI: one metric of an eval result as an inline SVG chart — a horizontal bar per
// bundle (its value over accepted runs), a whisker for its 95 % interval, the value and the
// rejected count beside it. No chart library: rectangles and lines, coloured by app.css.
import { el } from "../dom.js";
import { bundleLabel, chartScale, fmtInterval, fmtMetric, metricLabel } from "../evals.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 460;
const LABEL = 150; // the bundles' names, left of the bars
const PLOT = 190; // the bars and whiskers
const ROW = 28;

/**
 * An SVG element with its attributes and children.
 * @param {string} tag @param {Record<string, string | number>} attrs
 * @param {...(Node | string)} children
 */
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  node.append(...children);
  return node;
}

/**
 * The chart of one metric: `figures[i]` is bundle i's figure (null: it has none).
 * @param {string} name the metric
 * @param {import("../evals.js").BundleOutcome[]} bundles
 * @param {(import("../evals.js").Figure | null)[]} figures
 * @param {string} id the figure's caption id
 */
export function metricChart(name, bundles, figures, id) {
  const scale = chartScale(figures, PLOT);
  const height = ROW * bundles.length + 8;
  const said = [];
  const rows = bundles.map((bundle, i) => {
    const figure = figures[i];
    const y = 4 + i * ROW;
    const label = bundleLabel(bundle);
    // The bundle's name alone fits beside the bars (the tables above name its id too).
    const short = bundle.name || bundle.bundle.slice(0, 12);
    const parts = [svg("text", { x: LABEL - 6, y: y + ROW / 2 + 4, "text-anchor": "end", class: "chart-label" },
      svg("title", {}, label), short.length > 18 ? short.slice(0, 17) + "…" : short)];
    const rejected = figure ? figure.rejected : bundle.rejected;
    if (!figure || figure.value === null) {
      said.push(`${label}: no accepted run with a value, ${rejected} rejected`);
      parts.push(svg("text", { x: LABEL + 4, y: y + ROW / 2 + 4, class: "chart-note" },
        `no accepted run · rejected ${rejected}`));
      return svg("g", { class: "chart-row", "data-bundle": bundle.bundle }, ...parts);
    }
    const zero = LABEL + scale.x(Math.max(scale.low, 0));
    const end = LABEL + scale.x(figure.value);
    const interval = fmtInterval(name, figure.low, figure.high);
    said.push(`${label}: ${fmtMetric(name, figure.value)} ${interval}, ${figure.n} accepted, ${rejected} rejected`);
    parts.push(svg("rect", { class: `bar b${i % 4}`, x: Math.min(zero, end), y: y + 5,
      width: Math.max(Math.abs(end - zero), 1), height: ROW - 10, "data-bundle": bundle.bundle },
    svg("title", {}, `${label}: ${fmtMetric(name, figure.value)} ${interval}`)));
    if (figure.low !== null && figure.high !== null) {
      const lo = LABEL + scale.x(figure.low);
      const hi = LABEL + scale.x(figure.high);
      const mid = y + ROW / 2;
      parts.push(svg("g", { class: "whisker" },
        svg("line", { x1: lo, x2: hi, y1: mid, y2: mid }),
        svg("line", { x1: lo, x2: lo, y1: mid - 6, y2: mid + 6 }),
        svg("line", { x1: hi, x2: hi, y1: mid - 6, y2: mid + 6 })));
    }
    parts.push(svg("text", { x: LABEL + PLOT + 8, y: y + ROW / 2 + 4, class: "chart-value" },
      `${fmtMetric(name, figure.value)} · rej. ${rejected}`));
    return svg("g", { class: "chart-row", "data-bundle": bundle.bundle }, ...parts);
  });
  const axis = LABEL + scale.x(Math.max(scale.low, 0));
  const chart = svg("svg", { viewBox: `0 0 ${WIDTH} ${height}`, width: WIDTH, height, role: "img",
    "aria-labelledby": id, "aria-describedby": `${id}-desc`, class: "chart" },
  svg("desc", { id: `${id}-desc` }, said.join("; ")),
  svg("line", { class: "axis", x1: axis, x2: axis, y1: 0, y2: height }), ...rows);
  return el("figure", { class: "chart-box", dataset: { metric: name } },
    el("figcaption", { id }, metricLabel(name), el("span", { class: "muted", text: " — accepted runs, 95 % interval" })),
    chart);
}
