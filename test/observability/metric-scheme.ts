/**
 * The metric naming scheme of decision 057, as a checker over a Prometheus text exposition:
 * every family of ours is `railfence_<component>_...`, counters and only counters end in
 * `_total`, histograms carry their unit (`_size` for a count of items, such as calls per group
 * statement: decisions 068 and 070), every series has `component` and none has `service`
 * (a ServiceMonitor's label), label values are lower case (RPC names excepted).
 * prom-client's process metrics (`process_*`, `nodejs_*`) keep their conventional names.
 */

/** The services, and what every process shares: `rpc` (servers and clients), `db` (database pools). */
const COMPONENTS = ["rail_proxy", "executor", "lock", "payouts", "reconciler", "rail_stub", "rpc", "db"];
const CONVENTIONAL = /^(process|nodejs)_/;
const UNITS = /_(seconds|bytes|size)$/;
/** Labels exempt from lower case: protobuf names, printed as written (decision 057), and bucket bounds. */
const NAME_LABELS = new Set(["rpc_service", "rpc_method", "le", "quantile"]);
const LOWER = /^[a-z0-9_.:/-]*$/;

interface Sample {
  name: string;
  labels: Record<string, string>;
}

function parseLabels(body: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const m of body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
  return labels;
}

export function parseExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? /.exec(line);
    if (m) samples.push({ name: m[1]!, labels: parseLabels(m[2] ?? "") });
  }
  return { types, samples };
}

/** The family a sample belongs to (histogram samples carry _bucket/_sum/_count). */
function familyOf(name: string, types: Map<string, string>): string {
  if (types.has(name)) return name;
  const base = name.replace(/_(bucket|sum|count)$/, "");
  return types.has(base) ? base : name;
}

/** Every way `text` breaks the scheme, one line each (empty: it follows it). */
export function schemeViolations(text: string): string[] {
  const { types, samples } = parseExposition(text);
  const out: string[] = [];
  for (const [name, type] of types) {
    if (CONVENTIONAL.test(name)) {
      if (type !== "counter" && name.endsWith("_total")) out.push(`${name}: a ${type} named like a counter`);
      continue;
    }
    const component = COMPONENTS.find((c) => name.startsWith(`railfence_${c}_`));
    if (!component) out.push(`${name}: not railfence_<component>_... (components: ${COMPONENTS.join(", ")})`);
    if (type === "counter" && !name.endsWith("_total")) out.push(`${name}: a counter must end in _total`);
    if (type !== "counter" && name.endsWith("_total")) out.push(`${name}: a ${type} named like a counter`);
    if (type === "histogram" && !UNITS.test(name)) out.push(`${name}: a histogram without its unit (_seconds, _bytes, _size)`);
  }
  const seen = new Set<string>();
  for (const s of samples) {
    const family = familyOf(s.name, types);
    const problems: string[] = [];
    if ("service" in s.labels) problems.push(`${family}: label "service" (a ServiceMonitor sets it; ours is "component")`);
    if (!("component" in s.labels)) problems.push(`${family}: no "component" label`);
    if (!CONVENTIONAL.test(family)) {
      for (const [label, value] of Object.entries(s.labels)) {
        if (!NAME_LABELS.has(label) && !LOWER.test(value)) problems.push(`${family}: label ${label}="${value}" is not lower case`);
      }
    }
    for (const p of problems) if (!seen.has(p)) seen.add(p), out.push(p);
  }
  return out;
}
