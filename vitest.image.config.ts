import { defineConfig } from "vitest/config";

/**
 * `npm run test:image`: the container smoke test against the image deploy/image/build.sh built.
 * Not part of `npm test` (it needs podman and the image); .ci/run runs it as its own step.
 */
export default defineConfig({
  test: {
    include: ["test/image/**/*.smoke.ts"],
    setupFiles: ["test/support/fast-check-seed.ts"],
    // One mesh of containers per file, files one at a time: the machine has two cores.
    fileParallelism: false,
    // Generous bounds: the machine is shared, and a stuck container must still end the run.
    testTimeout: 600_000,
    hookTimeout: 600_000,
    pool: "forks",
  },
});
