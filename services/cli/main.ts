/**
 * `railfence` composition root: the only file that touches the process (argv, env, stdio,
 * exit code). Everything else takes these as arguments (see cli.ts).
 */
import { createInterface } from "node:readline";
import { runCli } from "./cli.js";
import type { Output } from "./output.js";

const output: Output = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
};

/**
 * Yes/no on the terminal. The question goes to stderr so stdout stays clean for --json; a
 * closed stdin (a script without --yes) counts as "no", the safe answer.
 */
function confirm(question: string): Promise<boolean> {
  return new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: false });
    let answered = false;
    process.stderr.write(question);
    rl.once("line", (line) => {
      answered = true;
      rl.close();
      resolve(/^\s*y(es)?\s*$/i.test(line));
    });
    rl.once("close", () => {
      if (!answered) {
        process.stderr.write("\n");
        resolve(false);
      }
    });
  });
}

const code = await runCli({ argv: process.argv.slice(2), env: process.env, cwd: process.cwd(), output, confirm });
process.exitCode = code;
