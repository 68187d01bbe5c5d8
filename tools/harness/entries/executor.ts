/**
 * An executor as the harness runs it when a test or drill stages a behaviour (a pause after the
 * fence, attempt references, NOT_FOUND trusted): the product's own config and factory, with the
 * behaviours the harness builds (controls/executor.ts) as dependencies.
 */
import { readConfig } from "../../../services/executor/config.js";
import { startExecutor } from "../../../services/executor/executor.js";
import { runService } from "../../../services/shared/observability/lifecycle.js";
import { createLogger } from "../../../services/shared/process/logger.js";
import { executorControls } from "../controls/executor.js";

const logger = createLogger("executor");
runService(logger, () => startExecutor(readConfig(), { logger, controls: executorControls(process.env) }));
