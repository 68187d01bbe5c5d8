#!/usr/bin/env node
// The `railfence` command: a shim over the compiled CLI (run `npm run build` first).
import "../dist/services/cli/main.js";
