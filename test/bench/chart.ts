/** A dependency-free SVG chart: throughput and p99 latency versus concurrency, one line per series. */
export interface Series {
  name: string;
  points: Array<{ x: number; throughput: number; p99: number }>;
}

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];

function panel(series: Series[], metric: "throughput" | "p99", ox: number, title: string, unit: string): string {
  const w = 420;
  const h = 260;
  const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p.x)))].sort((a, b) => a - b);
  const max = Math.max(1, ...series.flatMap((s) => s.points.map((p) => p[metric]))) * 1.1;
  const px = (x: number) => ox + 50 + (xs.indexOf(x) / Math.max(1, xs.length - 1)) * (w - 70);
  const py = (v: number) => 30 + (h - 60) * (1 - v / max);
  const out = [`<text x="${ox + w / 2}" y="18" text-anchor="middle" font-size="13">${title}</text>`];
  out.push(
    `<line x1="${ox + 50}" y1="${h - 30}" x2="${ox + w - 20}" y2="${h - 30}" stroke="#333"/><line x1="${ox + 50}" y1="30" x2="${ox + 50}" y2="${h - 30}" stroke="#333"/>`,
  );
  for (const x of xs) out.push(`<text x="${px(x)}" y="${h - 14}" text-anchor="middle" font-size="10">${x}</text>`);
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    out.push(`<text x="${ox + 45}" y="${py(v) + 3}" text-anchor="end" font-size="10">${v >= 100 ? v.toFixed(0) : v.toFixed(1)}</text>`);
  }
  out.push(`<text x="${ox + 12}" y="${h / 2}" font-size="10" transform="rotate(-90 ${ox + 12} ${h / 2})" text-anchor="middle">${unit}</text>`);
  out.push(`<text x="${ox + w / 2}" y="${h - 1}" text-anchor="middle" font-size="10">concurrency</text>`);
  series.forEach((s, i) => {
    const pts = s.points.map((p) => `${px(p.x).toFixed(1)},${py(p[metric]).toFixed(1)}`).join(" ");
    out.push(`<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2" points="${pts}"/>`);
  });
  return out.join("\n");
}

export function svgChart(series: Series[]): string {
  const legend = series
    .map(
      (s, i) =>
        `<rect x="${20 + i * 170}" y="272" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/><text x="${36 + i * 170}" y="282" font-size="11">${s.name}</text>`,
    )
    .join("\n");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="860" height="295" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
${panel(series, "throughput", 0, "throughput (ops/s)", "ops/s")}
${panel(series, "p99", 430, "p99 latency (ms)", "ms")}
${legend}
</svg>
`;
}
