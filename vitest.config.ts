import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["services/**/*.test.ts", "clients/**/src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // Fixed fast-check seed unless FUZZ_SEED says otherwise (see the file).
    setupFiles: ["test/support/fast-check-seed.ts"],
    // Tests start real processes and databases: generous, but bounded.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Two cores: two files at a time keeps process-heavy tests from starving each other.
    maxWorkers: 2,
    pool: "forks",
  },
});
