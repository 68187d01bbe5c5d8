/** Finds the project root (the folder holding package.json) from a module URL, in src or dist. */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export function projectRoot(from: string = import.meta.url): string {
  let dir = dirname(fileURLToPath(from));
  for (;;) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "migrations"))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error("project root not found");
    dir = parent;
  }
}
