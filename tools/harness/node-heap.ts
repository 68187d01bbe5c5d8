/**
 * The V8 old-space limit each service runs with, in MiB: what the chart gives it by default (its
 * container memory limit less 96 MiB; test/helm/node-heap.test.ts checks the two agree), so that
 * `npm start`, the tests, the drills and the bench run the heap the cluster runs. Without a
 * limit V8 sizes its heap from this machine's memory and lets the old generation grow several
 * times over between full collections (docs/decisions/020-node-heap-limit.md).
 */
export const NODE_HEAP_MB: Readonly<Record<string, number>> = {
  "rail-proxy": 288,
  "rail-stub": 96,
  lock: 160,
  payouts: 160,
  executor: 160,
  reconciler: 160,
  cli: 160,
  migrate: 96,
};

/** The node flag for a service; services the chart does not run (test fixtures) get none. */
export function heapArgs(service: string): string[] {
  const mb = NODE_HEAP_MB[service];
  return mb === undefined ? [] : [`--max-old-space-size=${mb}`];
}
