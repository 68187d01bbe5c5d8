/**
 * One fast-check seed for every property in a run (a vitest setup file). `npm test` and CI use a
 * fixed seed, so a red run means the code changed, not the dice; `npm run test:fuzz` draws a new
 * seed each run to explore. A failure prints its seed and path; replay it with FUZZ_SEED=<seed>.
 */
import fc from "fast-check";

const DEFAULT_SEED = 20261129;
const raw = process.env.FUZZ_SEED ?? String(DEFAULT_SEED);
const seed = raw === "random" ? Math.floor(Math.random() * 2 ** 31) : Number(raw);
if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer or "random", got ${JSON.stringify(raw)}`);
fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });

/**
 * FUZZ_SCALE multiplies every property's case count: 1 in `npm test` and CI; the hostile budget
 * command (`npm run hostile -- --cases N`) raises it to run N cases in one go.
 */
const rawScale = process.env.FUZZ_SCALE ?? "1";
export const FUZZ_SCALE = Number(rawScale);
if (!(FUZZ_SCALE > 0) || !Number.isFinite(FUZZ_SCALE)) throw new Error(`FUZZ_SCALE must be a positive number, got ${JSON.stringify(rawScale)}`);

/** A property's case count under FUZZ_SCALE. */
export const runs = (n: number): number => Math.max(1, Math.round(n * FUZZ_SCALE));
