import { defineConfig } from "vitest/config";

/**
 * The fast tier (`npm run test:unit`): tests that start no process, server or database, so no
 * global setup. Under a minute on two cores; `npm test` runs these and everything else.
 * A test belongs here when it runs in-process only; test/architecture/unit-tier.test.ts keeps
 * the tier honest (nothing here may start a process or a database).
 */
export const UNIT_TESTS = [
  "services/**/*.test.ts",
  "clients/**/src/**/*.test.ts",
  "test/support/*.test.ts",
  "test/architecture/*.test.ts",
  "test/reasons/*.test.ts",
  "test/observability/metrics-doc.test.ts",
];

export default defineConfig({
  test: {
    include: UNIT_TESTS,
    setupFiles: ["test/support/fast-check-seed.ts"],
    testTimeout: 30_000,
    maxWorkers: 2,
    pool: "forks",
  },
});
